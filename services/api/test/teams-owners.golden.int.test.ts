import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ORGANIZATION_ACCESS_KEYS } from '@runtasks/shared/domain';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { api, createOrganization, createOrganizationToken, createTeam, createTeamToken } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests of teams as go-tfe reads them: every organization's `owners` team, HCP's `visibility`
 * default, and the list's `filter[names]` and `q`. Documents are compared whole.
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
/** The owners team holds every organization-level right HCP has. */
const ALL_ACCESS = Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, true]));

const teamDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'teams', attributes } });

describe('teams: the owners team, visibility, filters', () => {
  let h: Harness;
  let organization: string;
  let ownerToken: string;
  let ownersTeamId: string;

  beforeAll(async () => {
    h = await startHarness();
    organization = await createOrganization(h, uniqueName('owned'));
    ownerToken = await createOrganizationToken(h, organization);
    const listed = await api(h, 'get', `/organizations/${organization}/teams`, ownerToken);
    ownersTeamId = listed.body.data[0].id as string;
  });
  afterAll(async () => {
    await h.close();
  });

  it('gives a new organization exactly one team, owners, with every organization-level right', async () => {
    const listed = await api(h, 'get', `/organizations/${organization}/teams`, ownerToken);
    expect(listed.status).toBe(200);
    expect(listed.body.meta.pagination['total-count']).toBe(1);
    expect(listed.body.data).toEqual([
      {
        id: expect.stringMatching(/^team-[A-Za-z0-9]{16}$/),
        type: 'teams',
        attributes: {
          name: 'owners',
          visibility: 'secret',
          'users-count': 0,
          'organization-access': ALL_ACCESS,
          'sso-team-id': null,
          'allow-member-token-management': true,
          'is-unified': false,
          'created-at': ISO,
          'updated-at': ISO,
          permissions: { 'can-destroy': false, 'can-update-membership': false },
        },
        relationships: {
          organization: { data: { id: organization, type: 'organizations' } },
          // No members yet.
          users: { data: [] },
          'organization-memberships': { data: [] },
        },
        links: { self: `/api/v2/teams/${ownersTeamId}` },
      },
    ]);
  });

  it("gives the owners team's token owner rights", async () => {
    const token = await createTeamToken(h, ownerToken, ownersTeamId);
    const shown = await api(h, 'get', `/organizations/${organization}`, token);
    expect(shown.body.data.attributes.permissions).toMatchObject({ 'can-update': true, 'can-destroy': true, 'can-create-team': true });
    // Owner-only requests: a team and the organization token are managed with it.
    const created = await api(h, 'post', `/organizations/${organization}/teams`, token, teamDocument({ name: uniqueName('by-owners') }));
    expect(created.status).toBe(201);
    expect((await api(h, 'get', `/teams/${created.body.data.id}`, token)).status).toBe(200);
    expect((await api(h, 'get', `/organizations/${organization}/authentication-token`, token)).status).toBe(200);
  });

  it('keeps the owners team: no delete, no rename, no right taken away, no second team named owners', async () => {
    const refused = expectError(await api(h, 'delete', `/teams/${ownersTeamId}`, ownerToken), 422);
    expect(refused.detail).toContain('owners team');
    expectError(
      await api(h, 'patch', `/teams/${ownersTeamId}`, ownerToken, teamDocument({ name: 'renamed' })),
      422,
      '/data/attributes/name',
    );
    expectError(
      await api(h, 'patch', `/teams/${ownersTeamId}`, ownerToken, teamDocument({ 'organization-access': { 'manage-workspaces': false } })),
      422,
      '/data/attributes/organization-access/manage-workspaces',
    );
    expectError(
      await api(h, 'post', `/organizations/${organization}/teams`, ownerToken, teamDocument({ name: 'owners' })),
      422,
      '/data/attributes/name',
    );
    const shown = await api(h, 'get', `/teams/${ownersTeamId}`, ownerToken);
    expect(shown.body.data.attributes).toMatchObject({ name: 'owners', 'organization-access': ALL_ACCESS });
    // Its visibility may change, and naming it by its own name is no rename.
    const updated = await api(
      h,
      'patch',
      `/teams/${ownersTeamId}`,
      ownerToken,
      teamDocument({ name: 'owners', visibility: 'organization' }),
    );
    expect(updated.status).toBe(200);
    expect(updated.body.data.attributes.visibility).toBe('organization');
    await api(h, 'patch', `/teams/${ownersTeamId}`, ownerToken, teamDocument({ visibility: 'secret' }));
  });

  it('stores visibility: secret unless set, organization when asked, 422 for anything else', async () => {
    const secret = await api(h, 'post', `/organizations/${organization}/teams`, ownerToken, teamDocument({ name: uniqueName('quiet') }));
    expect(secret.body.data.attributes.visibility).toBe('secret');
    const visible = await api(
      h,
      'post',
      `/organizations/${organization}/teams`,
      ownerToken,
      teamDocument({ name: uniqueName('loud'), visibility: 'organization' }),
    );
    expect(visible.status).toBe(201);
    expect((await api(h, 'get', `/teams/${visible.body.data.id}`, ownerToken)).body.data.attributes.visibility).toBe('organization');
    const hidden = await api(h, 'patch', `/teams/${visible.body.data.id}`, ownerToken, teamDocument({ visibility: 'secret' }));
    expect(hidden.body.data.attributes.visibility).toBe('secret');
    expectError(
      await api(h, 'patch', `/teams/${visible.body.data.id}`, ownerToken, teamDocument({ visibility: 'public' })),
      422,
      '/data/attributes/visibility',
    );
    expect((await api(h, 'get', `/teams/${visible.body.data.id}`, ownerToken)).body.data.attributes.visibility).toBe('secret');
  });

  describe('list filters', () => {
    let org: string;
    let token: string;
    beforeAll(async () => {
      org = await createOrganization(h, uniqueName('filters'));
      token = await createOrganizationToken(h, org);
      for (const name of ['alpha-one', 'alpha-two', 'beta', '50%_off']) await createTeam(h, org, token, name);
    });

    const names = async (query: string): Promise<{ names: string[]; total: number }> => {
      const res = await api(h, 'get', `/organizations/${org}/teams?${query}`, token);
      expect(res.status).toBe(200);
      return {
        names: (res.body.data as { attributes: { name: string } }[]).map((team) => team.attributes.name).sort(),
        total: res.body.meta.pagination['total-count'] as number,
      };
    };

    it.each<[string, string[]]>([
      ['', ['50%_off', 'alpha-one', 'alpha-two', 'beta', 'owners']],
      ['filter%5Bnames%5D=beta,alpha-two', ['alpha-two', 'beta']],
      ['filter%5Bnames%5D=owners', ['owners']],
      ['filter%5Bnames%5D=nobody', []],
      ['q=ALPHA', ['alpha-one', 'alpha-two']],
      ['q=pha-o', ['alpha-one']],
      // q is text, not a pattern: % and _ match only themselves.
      ['q=%25_', ['50%_off']],
      ['q=_', ['50%_off']],
      ['q=alpha&filter%5Bnames%5D=alpha-one,beta', ['alpha-one']],
    ])('?%s → %j, counted alike', async (query, expected) => {
      expect(await names(query)).toEqual({ names: expected, total: expected.length });
    });

    it.each(['filter%5Bnames%5D=beta,', 'filter%5Bnames%5D=a&filter%5Bnames%5D=b', 'q=a&q=b'])(
      '?%s → 422 naming the parameter',
      async (query) => {
        const error = expectError(await api(h, 'get', `/organizations/${org}/teams?${query}`, token), 422);
        expect(error.source).toEqual({ parameter: query.startsWith('q') ? 'q' : 'filter[names]' });
      },
    );
  });
  // Last: it migrates this test's database down and up again.
  it('gives existing organizations their owners team on migration, except one that has a team named owners', async () => {
    const plain = await createOrganization(h, uniqueName('before'));
    const named = await createOrganization(h, uniqueName('named'));
    const db = h.orm.em.fork().getConnection();
    await h.orm.migrator.down({ to: 'Migration20261125170000RunStagesPlanned' });
    // As before the migration: no owners teams, and one organization made its own team named owners.
    expect(await db.execute(`select count(*)::int as n from teams where name = 'owners'`)).toEqual([{ n: 0 }]);
    await db.execute(
      `insert into teams (id, organization_id, name, manage_run_tasks, manage_workspaces, manage_policy_overrides, created_at, updated_at)
       select 'team-madebyhandxxxxx', id, 'owners', false, false, false, now(), now() from organizations where name = ?`,
      [named],
    );
    await h.orm.migrator.up();
    const teams = await db.execute<
      { organization: string; id: string; is_owners: boolean; manage_workspaces: boolean; visibility: string }[]
    >(
      `select o.name as organization, t.id, t.is_owners, t.manage_workspaces, t.visibility
         from teams t join organizations o on o.id = t.organization_id where t.name = 'owners' and o.name in (?, ?) order by o.name`,
      [named, plain],
    );
    expect(teams.sort((a, b) => a.organization.localeCompare(b.organization))).toEqual(
      [
        {
          organization: plain,
          id: expect.stringMatching(/^team-[A-Za-z0-9]{16}$/),
          is_owners: true,
          manage_workspaces: true,
          visibility: 'secret',
        },
        { organization: named, id: 'team-madebyhandxxxxx', is_owners: false, manage_workspaces: false, visibility: 'secret' },
      ].sort((a, b) => a.organization.localeCompare(b.organization)),
    );
  });
});
