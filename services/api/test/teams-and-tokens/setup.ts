import { afterAll, beforeAll } from '@jest/globals';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { type Fixture, seedOrganization } from '../../../../test/support/fixtures.ts';

/** The API and two seeded organizations. */
export function useTeamsAndTokens() {
  const g = {} as {
    h: Harness;
    acme: Fixture;
    other: Fixture;
  };

  beforeAll(async () => {
    g.h = await startHarness();
    g.acme = await seedOrganization(g.h, 'acme');
    g.other = await seedOrganization(g.h, 'other');
  });
  afterAll(async () => {
    await g.h.close();
  });
  return Object.assign(g, {});
}
