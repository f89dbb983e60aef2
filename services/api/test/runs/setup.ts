import { afterAll, beforeAll } from '@jest/globals';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { createTeam, createTeamToken, type Fixture, grantWorkspace, seedOrganization } from '../../../../test/support/fixtures.ts';

/** The API and two organizations, with teams of every runs access level in the first. */
export function useRunsApi() {
  const g = {} as {
    h: Harness;
    acme: Fixture;
    other: Fixture;
    readersTeamId: string;
    readerToken: string;
    plannerToken: string;
    applierToken: string;
    outsiderToken: string;
    managerToken: string;
  };

  beforeAll(async () => {
    g.h = await startHarness();
    g.acme = await seedOrganization(g.h, 'acme');
    g.other = await seedOrganization(g.h, 'other');
    const teamWith = async (
      name: string,
      access: Record<string, unknown> | null,
      organizationAccess: Record<string, boolean> = {},
    ): Promise<string> => {
      const teamId = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, name, organizationAccess);
      if (access) await grantWorkspace(g.h, g.acme.organizationToken, teamId, g.acme.workspaceId, access);
      if (name === 'readers') g.readersTeamId = teamId;
      return createTeamToken(g.h, g.acme.organizationToken, teamId);
    };
    g.readerToken = await teamWith('readers', { access: 'read' });
    g.plannerToken = await teamWith('planners', { access: 'custom', runs: 'plan' });
    g.applierToken = await teamWith('appliers', { access: 'write' });
    g.outsiderToken = await teamWith('outsiders', null);
    g.managerToken = await teamWith('managers', null, { 'manage-workspaces': true });
  });
  afterAll(async () => {
    await g.h.close();
  });
  return Object.assign(g, {});
}
