import { afterAll, beforeAll } from '@jest/globals';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { createTeamToken, type Fixture, seedOrganization } from '../../../../test/support/fixtures.ts';

/** The API and two seeded organizations, acme with a team token. */
export function useOrganizationsApi() {
  const g = {} as {
    h: Harness;
    acme: Fixture;
    other: Fixture;
    acmeTeamToken: string;
  };

  beforeAll(async () => {
    g.h = await startHarness();
    g.acme = await seedOrganization(g.h, 'acme');
    g.other = await seedOrganization(g.h, 'other');
    g.acmeTeamToken = await createTeamToken(g.h, g.acme.organizationToken, g.acme.teamId);
  });
  afterAll(async () => {
    await g.h.close();
  });
  return Object.assign(g, {});
}
