import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ORGANIZATION_ACCESS_KEYS } from '@runtasks/shared/domain';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { api, createWorkspace, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests of the team settings go-tfe sends (`sso-team-id`, `allow-member-token-management`, the
 * whole `organization-access` set) and of team access's custom permissions, with HCP's rules for both.
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
const NO_ACCESS = Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, false]));
const teamDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'teams', attributes } });

/** Keys stored as given (those without a dependency, and not read-workspaces, which follows manage-workspaces). */
const STORED_KEYS = ORGANIZATION_ACCESS_KEYS.filter(
  (key) => !['read-workspaces', 'manage-teams', 'manage-organization-access'].includes(key),
);

describe('team settings and team access permissions', () => {
  let h: Harness;
  let acme: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('acme'));
  });
  afterAll(async () => {
    await h.close();
  });

  const createTeam = (attributes: Record<string, unknown>) =>
    api(
      h,
      'post',
      `/organizations/${acme.organization}/teams`,
      acme.organizationToken,
      teamDocument({ name: uniqueName('t'), ...attributes }),
    );

  it("returns a new team whole, with HCP's defaults", async () => {
    const res = await createTeam({});
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^team-/),
      type: 'teams',
      attributes: {
        name: res.body.data.attributes.name,
        visibility: 'secret',
        'users-count': 0,
        'organization-access': NO_ACCESS,
        'sso-team-id': null,
        'allow-member-token-management': true,
        'is-unified': false,
        'created-at': ISO,
        'updated-at': ISO,
        permissions: { 'can-destroy': true, 'can-update-membership': false },
      },
      relationships: {
        organization: { data: { id: acme.organization, type: 'organizations' } },
        // No members yet.
        users: { data: [] },
        'organization-memberships': { data: [] },
      },
      links: { self: `/api/v2/teams/${res.body.data.id}` },
    });
  });

  it('stores sso-team-id and allow-member-token-management on create and update', async () => {
    const created = await createTeam({ 'sso-team-id': '7dddb675-73e0', 'allow-member-token-management': false });
    expect(created.body.data.attributes).toMatchObject({ 'sso-team-id': '7dddb675-73e0', 'allow-member-token-management': false });
    const id = created.body.data.id as string;
    const updated = await api(
      h,
      'patch',
      `/teams/${id}`,
      acme.organizationToken,
      teamDocument({ 'sso-team-id': null, 'allow-member-token-management': 'true' }),
    );
    expect(updated.body.data.attributes).toMatchObject({ 'sso-team-id': null, 'allow-member-token-management': true });
    const shown = await api(h, 'get', `/teams/${id}`, acme.organizationToken);
    expect(shown.body.data.attributes).toEqual({ ...updated.body.data.attributes, 'updated-at': ISO });
  });

  it.each(STORED_KEYS)('stores organization-access %s alone, leaving every other key off', async (key) => {
    const created = await createTeam({ 'organization-access': { [key]: true } });
    expect(created.status).toBe(201);
    const expected = { ...NO_ACCESS, [key]: true, 'read-workspaces': key === 'manage-workspaces' };
    expect(created.body.data.attributes['organization-access']).toEqual(expected);
    const id = created.body.data.id as string;
    expect((await api(h, 'get', `/teams/${id}`, acme.organizationToken)).body.data.attributes['organization-access']).toEqual(expected);
    const off = await api(h, 'patch', `/teams/${id}`, acme.organizationToken, teamDocument({ 'organization-access': { [key]: false } }));
    expect(off.body.data.attributes['organization-access']).toEqual(NO_ACCESS);
  });

  it('stores manage-teams and manage-organization-access with the keys they need', async () => {
    const access = { 'manage-membership': true, 'manage-teams': true, 'manage-organization-access': true, 'access-secret-teams': true };
    const created = await createTeam({ 'organization-access': access });
    expect(created.body.data.attributes['organization-access']).toEqual({ ...NO_ACCESS, ...access });
  });

  it.each<[Record<string, unknown>, string]>([
    [{ 'manage-teams': true }, 'manage-teams'],
    [{ 'manage-membership': true, 'manage-organization-access': true }, 'manage-organization-access'],
    [{ 'read-workspaces': true }, 'read-workspaces'],
    [{ 'manage-policies': 'yes' }, 'manage-policies'],
  ])('refuses organization-access %j with a 422 at %s, creating nothing', async (access, key) => {
    const name = uniqueName('refused');
    const res = await api(
      h,
      'post',
      `/organizations/${acme.organization}/teams`,
      acme.organizationToken,
      teamDocument({ name, 'organization-access': access }),
    );
    expectError(res, 422, `/data/attributes/organization-access/${key}`);
    const listed = await api(h, 'get', `/organizations/${acme.organization}/teams?filter%5Bnames%5D=${name}`, acme.organizationToken);
    expect(listed.body.data).toEqual([]);
  });

  it('refuses taking manage-membership from a team that manages teams (422), changing nothing', async () => {
    const created = await createTeam({ 'organization-access': { 'manage-membership': true, 'manage-teams': true } });
    const id = created.body.data.id as string;
    const res = await api(
      h,
      'patch',
      `/teams/${id}`,
      acme.organizationToken,
      teamDocument({ 'organization-access': { 'manage-membership': false } }),
    );
    expectError(res, 422, '/data/attributes/organization-access/manage-teams');
    const shown = await api(h, 'get', `/teams/${id}`, acme.organizationToken);
    expect(shown.body.data.attributes['organization-access']['manage-membership']).toBe(true);
  });

  it('accepts read-workspaces with manage-workspaces, and shows it following manage-workspaces', async () => {
    const created = await createTeam({ 'organization-access': { 'manage-workspaces': true, 'read-workspaces': true } });
    expect(created.status).toBe(201);
    expect(created.body.data.attributes['organization-access']).toMatchObject({ 'manage-workspaces': true, 'read-workspaces': true });
  });

  describe('team access custom permissions', () => {
    const accessDocument = (teamId: string, workspaceId: string, attributes: Record<string, unknown>) => ({
      data: {
        type: 'team-workspaces',
        attributes,
        relationships: { team: { data: { type: 'teams', id: teamId } }, workspace: { data: { type: 'workspaces', id: workspaceId } } },
      },
    });
    const grant = async (attributes: Record<string, unknown>) => {
      const team = (await createTeam({})).body.data.id as string;
      const workspace = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
      return {
        team,
        workspace,
        res: await api(h, 'post', '/team-workspaces', acme.organizationToken, accessDocument(team, workspace, attributes)),
      };
    };

    it('returns an access whole, with what its level implies', async () => {
      const { team, workspace, res } = await grant({ access: 'write' });
      expect(res.status).toBe(201);
      expect(res.body.data).toEqual({
        id: expect.stringMatching(/^tws-/),
        type: 'team-workspaces',
        attributes: {
          access: 'write',
          runs: 'apply',
          variables: 'write',
          'state-versions': 'write',
          'sentinel-mocks': 'read',
          'workspace-locking': true,
          'run-tasks': false,
          'created-at': ISO,
          'updated-at': ISO,
        },
        relationships: { team: { data: { id: team, type: 'teams' } }, workspace: { data: { id: workspace, type: 'workspaces' } } },
        links: { self: `/api/v2/team-workspaces/${res.body.data.id}` },
      });
    });

    it('stores every custom permission with access custom, and shows them on read', async () => {
      const attributes = {
        access: 'custom',
        runs: 'plan',
        variables: 'read',
        'state-versions': 'read-outputs',
        'sentinel-mocks': 'read',
        'workspace-locking': true,
        'run-tasks': true,
      };
      const { res } = await grant(attributes);
      expect(res.status).toBe(201);
      expect(res.body.data.attributes).toEqual({ ...attributes, 'created-at': ISO, 'updated-at': ISO });
      const shown = await api(h, 'get', `/team-workspaces/${res.body.data.id}`, acme.organizationToken);
      expect(shown.body.data.attributes).toEqual(res.body.data.attributes);
    });

    it.each<[string, unknown]>([
      ['variables', 'write'],
      ['state-versions', 'none'],
      ['sentinel-mocks', 'read'],
      ['workspace-locking', true],
    ])("refuses %s with access 'read' (422, HCP's words), creating nothing", async (attribute, value) => {
      const { team, res } = await grant({ access: 'read', [attribute]: value });
      const error = expectError(res, 422, `/data/attributes/${attribute}`);
      expect(error.detail).toMatch(/is read-only when access level is 'read'; use the 'custom' access level to set this attribute\.$/);
      const listed = await api(h, 'get', `/team-workspaces?filter%5Bteam%5D%5Bid%5D=${team}`, acme.organizationToken);
      expect(listed.body.data).toEqual([]);
    });

    it.each<[string, unknown]>([
      ['variables', 'admin'],
      ['state-versions', 'read-all'],
      ['sentinel-mocks', 'write'],
      ['workspace-locking', 'sometimes'],
    ])('refuses %s = %j (422)', async (attribute, value) => {
      const { res } = await grant({ access: 'custom', [attribute]: value });
      expectError(res, 422, `/data/attributes/${attribute}`);
    });
  });
});
