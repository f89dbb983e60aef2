import { afterAll, beforeAll } from '@jest/globals';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { createTeam, createTeamToken, type Fixture, grantWorkspace, seedOrganization } from '../../../../test/support/fixtures.ts';

/** The API, two seeded organizations, and acme teams that manage, read, or have no access. */
export function useWorkspacesApi() {
  const g = {} as {
    h: Harness;
    acme: Fixture;
    other: Fixture;
    /** A team with "manage workspaces" organization access. */
    managerToken: string;
    /** A team without organization access, granted read access to acme's seeded workspace only. */
    readerToken: string;
    /** A team with no access at all. */
    outsiderToken: string;
  };

  beforeAll(async () => {
    g.h = await startHarness();
    g.acme = await seedOrganization(g.h, 'acme');
    g.other = await seedOrganization(g.h, 'other');
    g.managerToken = await createTeamToken(
      g.h,
      g.acme.organizationToken,
      await createTeam(g.h, g.acme.organization, g.acme.organizationToken, 'managers', { 'manage-workspaces': true }),
    );
    const readers = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, 'readers');
    await grantWorkspace(g.h, g.acme.organizationToken, readers, g.acme.workspaceId, { access: 'read' });
    g.readerToken = await createTeamToken(g.h, g.acme.organizationToken, readers);
    g.outsiderToken = await createTeamToken(g.h, g.acme.organizationToken, g.acme.teamId);
  });
  afterAll(async () => {
    await g.h.close();
  });
  return Object.assign(g, {});
}
