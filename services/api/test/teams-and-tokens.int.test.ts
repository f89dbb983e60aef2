import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { API_TOKEN_PREFIX } from '@runtasks/shared/security';
import { ORGANIZATION_ACCESS_KEYS } from '@runtasks/shared/domain';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';

const TOKEN_SHAPE = new RegExp(`^${API_TOKEN_PREFIX}[A-Za-z0-9_-]{43}$`);

/** Every organization-access key HCP has, off; tests spread the keys they turn on over it. */
const NO_ACCESS = Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, false]));

const teamDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'teams', attributes } });

function teamWorkspaceDocument(teamId: string, workspaceId: string, attributes: Record<string, unknown> = {}) {
  return {
    data: {
      type: 'team-workspaces',
      attributes,
      relationships: { team: { data: { type: 'teams', id: teamId } }, workspace: { data: { type: 'workspaces', id: workspaceId } } },
    },
  };
}

describe('teams, tokens and team access', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, 'acme');
    other = await seedOrganization(h, 'other');
  });
  afterAll(async () => {
    await h.close();
  });

  describe('organization authentication token', () => {
    it('creates a token (201) shown once, then shows only its metadata', async () => {
      const name = await createOrganization(h, uniqueName('tokens'));
      const created = await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, {
        data: { type: 'authentication-tokens', attributes: { description: 'CI', 'expired-at': '2999-01-01T00:00:00Z' } },
      });
      expect(created.status).toBe(201);
      expect(created.headers['content-type']).toContain(JSON_API);
      expect(created.body.data.type).toBe('authentication-tokens');
      expect(created.body.data.id).toMatch(/^at-/);
      expect(created.body.data.attributes.token).toMatch(TOKEN_SHAPE);
      expect(created.body.data.attributes.description).toBe('CI');
      expect(created.body.data.attributes['expired-at']).toBe('2999-01-01T00:00:00.000Z');
      // An organization token has no team to name; it names its creator (the site admin's service user).
      expect(created.body.data.relationships).toEqual({ 'created-by': { data: { type: 'users', id: 'user-site-admin' } } });

      const token = created.body.data.attributes.token as string;
      expect((await api(h, 'get', `/organizations/${name}`, token)).status).toBe(200);

      const shown = await api(h, 'get', `/organizations/${name}/authentication-token`, token);
      expect(shown.status).toBe(200);
      expect(shown.body.data.id).toBe(created.body.data.id);
      expect(shown.body.data.attributes.token).toBeNull();
      expect(shown.body.data.attributes.description).toBe('CI');
      expect(shown.body.data.attributes['created-at']).toBe(created.body.data.attributes['created-at']);
    });

    it('creates a token without a body or with an empty object', async () => {
      const name = await createOrganization(h, uniqueName('nobody'));
      const res = await h.http.post(`/api/v2/organizations/${name}/authentication-token`).set('Authorization', `Bearer ${h.adminToken}`);
      expect(res.status).toBe(201);
      expect(res.body.data.attributes.token).toMatch(TOKEN_SHAPE);
      expect(res.body.data.attributes.description).toBeNull();
      expect(res.body.data.attributes['expired-at']).toBeNull();
      const empty = await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, {});
      expect(empty.status).toBe(201);
      expect(empty.body.data.attributes.token).toMatch(TOKEN_SHAPE);
    });

    // go-tfe sends `""`, HCP's documentation `authentication-token`; the answer is always `authentication-tokens`.
    it.each(['', 'authentication-token', 'authentication-tokens'])(
      'accepts data.type %j for organization and team tokens',
      async (type) => {
        const name = await createOrganization(h, uniqueName('types'));
        const organizationToken = await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, {
          data: { type, attributes: { 'expired-at': '2999-01-01T00:00:00Z' } },
        });
        expect(organizationToken.status).toBe(201);
        expect(organizationToken.body.data.type).toBe('authentication-tokens');
        expect(organizationToken.body.data.attributes['expired-at']).toBe('2999-01-01T00:00:00.000Z');
        const team = await createTeam(h, name, h.adminToken, uniqueName('types'));
        const teamToken = await api(h, 'post', `/teams/${team}/authentication-token`, h.adminToken, { data: { type } });
        expect(teamToken.status).toBe(201);
        expect(teamToken.body.data.type).toBe('authentication-tokens');
        expect(teamToken.body.data.attributes.token).toMatch(TOKEN_SHAPE);
      },
    );

    it('refuses ?token=audit-trails (400 naming the parameter) and issues or revokes nothing', async () => {
      const name = await createOrganization(h, uniqueName('audit'));
      const token = await createOrganizationToken(h, name);
      for (const method of ['post', 'get', 'delete'] as const) {
        const error = expectError(
          await api(h, method, `/organizations/${name}/authentication-token?token=audit-trails`, h.adminToken),
          400,
        );
        expect(error.source).toEqual({ parameter: 'token' });
        expect(error.detail).toContain('token=audit-trails');
      }
      // The ordinary token is still the active one.
      expect((await api(h, 'get', '/organizations', token)).status).toBe(200);
    });

    it('answers 422 for a body that is neither empty nor a token document', async () => {
      const name = await createOrganization(h, uniqueName('junk'));
      expectError(
        await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, { description: 'not wrapped' }),
        422,
        '/data',
      );
      expectError(
        await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, { data: { type: 'teams', attributes: {} } }),
        422,
        '/data/type',
      );
    });

    it('regenerating revokes the previous token (old token 401, new token works)', async () => {
      const name = await createOrganization(h, uniqueName('regen'));
      const first = await createOrganizationToken(h, name);
      const firstMeta = await api(h, 'get', `/organizations/${name}/authentication-token`, first);
      const second = await createOrganizationToken(h, name);
      expect(second).not.toBe(first);

      const old = await api(h, 'get', `/organizations/${name}`, first);
      expect(old.status).toBe(401);
      expect(old.body).toEqual(UNAUTHORIZED);
      expect((await api(h, 'get', `/organizations/${name}`, second)).status).toBe(200);
      const meta = await api(h, 'get', `/organizations/${name}/authentication-token`, second);
      expect(meta.body.data.id).not.toBe(firstMeta.body.data.id);
    });

    it('lets an organization token regenerate itself, which revokes the caller', async () => {
      const name = await createOrganization(h, uniqueName('self'));
      const token = await createOrganizationToken(h, name);
      const res = await api(h, 'post', `/organizations/${name}/authentication-token`, token);
      expect(res.status).toBe(201);
      expect((await api(h, 'get', `/organizations/${name}`, token)).status).toBe(401);
      expect((await api(h, 'get', `/organizations/${name}`, res.body.data.attributes.token)).status).toBe(200);
    });

    it('DELETE revokes the token: 204, then the token is 401 and GET/DELETE answer 404', async () => {
      const name = await createOrganization(h, uniqueName('revoke'));
      const token = await createOrganizationToken(h, name);
      const res = await api(h, 'delete', `/organizations/${name}/authentication-token`, h.adminToken);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await api(h, 'get', `/organizations/${name}`, token)).status).toBe(401);
      expectNotFound(await api(h, 'get', `/organizations/${name}/authentication-token`, h.adminToken));
      expectNotFound(await api(h, 'delete', `/organizations/${name}/authentication-token`, h.adminToken));
    });

    it('answers 404 to team tokens and to other organizations, for every method', async () => {
      const teamToken = await createTeamToken(
        h,
        acme.organizationToken,
        await createTeam(h, acme.organization, acme.organizationToken, uniqueName('t'), { 'manage-workspaces': true }),
      );
      for (const token of [teamToken, other.organizationToken]) {
        expectNotFound(await api(h, 'post', `/organizations/${acme.organization}/authentication-token`, token));
        expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/authentication-token`, token));
        expectNotFound(await api(h, 'delete', `/organizations/${acme.organization}/authentication-token`, token));
      }
      expect((await api(h, 'get', `/organizations/${acme.organization}`, acme.organizationToken)).status).toBe(200);
      expectNotFound(await api(h, 'post', '/organizations/missing/authentication-token', h.adminToken));
    });

    it('answers 401 without a token', async () => {
      const res = await api(h, 'post', `/organizations/${acme.organization}/authentication-token`);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    });

    it('answers 422 with a pointer for an invalid expiry or description', async () => {
      const name = await createOrganization(h, uniqueName('invalid'));
      const token = await createOrganizationToken(h, name);
      const badDate = await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, {
        data: { type: 'authentication-tokens', attributes: { 'expired-at': 'tomorrow' } },
      });
      expectError(badDate, 422, '/data/attributes/expired-at');
      const badDescription = await api(h, 'post', `/organizations/${name}/authentication-token`, h.adminToken, {
        data: { type: 'authentication-tokens', attributes: { description: 5 } },
      });
      expectError(badDescription, 422, '/data/attributes/description');
      // A rejected request revokes nothing.
      expect((await api(h, 'get', `/organizations/${name}`, token)).status).toBe(200);
    });
  });

  describe('teams', () => {
    describe('POST /organizations/:name/teams', () => {
      it('lets the owner create a team (201) with default organization access', async () => {
        const res = await api(
          h,
          'post',
          `/organizations/${acme.organization}/teams`,
          acme.organizationToken,
          teamDocument({ name: 'developers' }),
        );
        expect(res.status).toBe(201);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body.data.type).toBe('teams');
        expect(res.body.data.id).toMatch(/^team-/);
        expect(res.body.data.attributes.name).toBe('developers');
        expect(res.body.data.attributes['organization-access']).toEqual(NO_ACCESS);
        expect(res.body.data.relationships.organization.data).toEqual({ type: 'organizations', id: acme.organization });
        expect(res.body.data.links.self).toBe(`/api/v2/teams/${res.body.data.id}`);
      });

      it('stores organization-access flags, booleans or strings', async () => {
        const res = await api(
          h,
          'post',
          `/organizations/${acme.organization}/teams`,
          h.adminToken,
          teamDocument({
            name: 'operators',
            'organization-access': {
              'manage-workspaces': true,
              'manage-run-tasks': 'true',
              'manage-policy-overrides': false,
              'manage-vcs-settings': true,
            },
          }),
        );
        expect(res.status).toBe(201);
        // Managing every workspace includes reading every one.
        expect(res.body.data.attributes['organization-access']).toEqual({
          ...NO_ACCESS,
          'manage-run-tasks': true,
          'manage-workspaces': true,
          'manage-vcs-settings': true,
          'read-workspaces': true,
        });
        const shown = await api(h, 'get', `/teams/${res.body.data.id}`, acme.organizationToken);
        expect(shown.body.data.attributes['organization-access']['manage-workspaces']).toBe(true);
      });

      it('answers 422 "has already been taken" for a duplicate name in the organization, but allows it elsewhere', async () => {
        const name = uniqueName('dup');
        await createTeam(h, acme.organization, acme.organizationToken, name);
        const res = await api(h, 'post', `/organizations/${acme.organization}/teams`, acme.organizationToken, teamDocument({ name }));
        expectError(res, 422, '/data/attributes/name');
        expect(res.body.errors[0].detail).toContain('has already been taken');
        const elsewhere = await api(
          h,
          'post',
          `/organizations/${other.organization}/teams`,
          other.organizationToken,
          teamDocument({ name }),
        );
        expect(elsewhere.status).toBe(201);
      });

      it.each([
        ['a missing name', {}, '/data/attributes/name'],
        ['an empty name', { name: '' }, '/data/attributes/name'],
        ['a numeric name', { name: 12 }, '/data/attributes/name'],
        [
          'a non-boolean access flag',
          { name: 'flags', 'organization-access': { 'manage-workspaces': 'yes' } },
          '/data/attributes/organization-access/manage-workspaces',
        ],
      ])('answers 422 with a pointer for %s', async (_label, attributes, pointer) => {
        const res = await api(h, 'post', `/organizations/${acme.organization}/teams`, acme.organizationToken, teamDocument(attributes));
        expectError(res, 422, pointer);
      });

      it('answers 404 to a team token and to another organization', async () => {
        const teamToken = await createTeamToken(
          h,
          acme.organizationToken,
          await createTeam(h, acme.organization, acme.organizationToken, uniqueName('m'), {
            'manage-workspaces': true,
            'manage-run-tasks': true,
          }),
        );
        const byTeam = await api(h, 'post', `/organizations/${acme.organization}/teams`, teamToken, teamDocument({ name: 'by-team' }));
        expectNotFound(byTeam);
        const byOther = await api(
          h,
          'post',
          `/organizations/${acme.organization}/teams`,
          other.organizationToken,
          teamDocument({ name: 'by-other' }),
        );
        expectNotFound(byOther);
        const list = await api(h, 'get', `/organizations/${acme.organization}/teams?page[size]=100`, acme.organizationToken);
        expect(list.body.data.map((team: { attributes: { name: string } }) => team.attributes.name)).not.toEqual(
          expect.arrayContaining(['by-team']),
        );
        expect(list.body.data.map((team: { attributes: { name: string } }) => team.attributes.name)).not.toEqual(
          expect.arrayContaining(['by-other']),
        );
      });
    });

    describe('GET /organizations/:name/teams', () => {
      it("lists the organization's teams in creation order with pagination meta", async () => {
        const org = await seedOrganization(h, uniqueName('listing'));
        const second = await createTeam(h, org.organization, org.organizationToken, 'second');
        const res = await api(h, 'get', `/organizations/${org.organization}/teams`, org.organizationToken);
        expect(res.status).toBe(200);
        // The owners team came with the organization.
        const [owners, ...others] = res.body.data as { id: string; attributes: { name: string } }[];
        expect(owners?.attributes.name).toBe('owners');
        expect(others.map((team) => team.id)).toEqual([org.teamId, second]);
        expect(res.body.meta.pagination['total-count']).toBe(3);
        const page = await api(h, 'get', `/organizations/${org.organization}/teams?page[size]=1&page[number]=3`, h.adminToken);
        expect(page.body.data.map((team: { id: string }) => team.id)).toEqual([second]);
        expect(page.body.meta.pagination).toMatchObject({ 'current-page': 3, 'total-pages': 3, 'next-page': null, 'prev-page': 2 });
      });

      it('answers 404 to a team token and to another organization', async () => {
        const teamToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
        expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/teams`, teamToken));
        expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/teams`, other.organizationToken));
      });
    });

    describe('GET, PATCH and DELETE /teams/:id', () => {
      it('shows a team to its owner and the admin, 404 to others', async () => {
        for (const token of [acme.organizationToken, h.adminToken]) {
          const res = await api(h, 'get', `/teams/${acme.teamId}`, token);
          expect(res.status).toBe(200);
          expect(res.body.data.id).toBe(acme.teamId);
          expect(res.body.data.attributes.name).toBe(`${acme.organization}-team`);
        }
        expectNotFound(await api(h, 'get', `/teams/${acme.teamId}`, other.organizationToken));
        expectNotFound(await api(h, 'get', '/teams/team-doesnotexist0000', h.adminToken));
      });

      it('updates the name and flags; omitted flags keep their value', async () => {
        const id = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('patch'), { 'manage-run-tasks': true });
        const res = await api(
          h,
          'patch',
          `/teams/${id}`,
          acme.organizationToken,
          teamDocument({ name: 'patched', 'organization-access': { 'manage-workspaces': true } }),
        );
        expect(res.status).toBe(200);
        expect(res.body.data.attributes.name).toBe('patched');
        expect(res.body.data.attributes['organization-access']).toEqual({
          ...NO_ACCESS,
          'manage-run-tasks': true,
          'manage-workspaces': true,
          'read-workspaces': true,
        });
        const shown = await api(h, 'get', `/teams/${id}`, acme.organizationToken);
        expect(shown.body.data.attributes.name).toBe('patched');
        expect(shown.body.data.attributes['organization-access']['manage-workspaces']).toBe(true);
      });

      it('gives a team its new organization access on its next request', async () => {
        const id = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('grow'));
        const teamToken = await createTeamToken(h, acme.organizationToken, id);
        const workspace = { data: { type: 'workspaces', attributes: { name: uniqueName('team-ws') } } };
        expectNotFound(await api(h, 'post', `/organizations/${acme.organization}/workspaces`, teamToken, workspace));
        expect(
          (
            await api(
              h,
              'patch',
              `/teams/${id}`,
              acme.organizationToken,
              teamDocument({ 'organization-access': { 'manage-workspaces': true } }),
            )
          ).status,
        ).toBe(200);
        expect((await api(h, 'post', `/organizations/${acme.organization}/workspaces`, teamToken, workspace)).status).toBe(201);
      });

      it('answers 422 for a rename to a taken name or an invalid value', async () => {
        const id = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('rename'));
        const taken = await api(h, 'patch', `/teams/${id}`, acme.organizationToken, teamDocument({ name: `${acme.organization}-team` }));
        expectError(taken, 422, '/data/attributes/name');
        expect(taken.body.errors[0].detail).toContain('has already been taken');
        expectError(
          await api(h, 'patch', `/teams/${id}`, acme.organizationToken, teamDocument({ name: '' })),
          422,
          '/data/attributes/name',
        );
        expectError(
          await api(h, 'patch', `/teams/${id}`, acme.organizationToken, teamDocument({ 'organization-access': { 'manage-run-tasks': 1 } })),
          422,
          '/data/attributes/organization-access/manage-run-tasks',
        );
      });

      it('answers 404 to PATCH and DELETE from another organization, changing nothing', async () => {
        expectNotFound(await api(h, 'patch', `/teams/${acme.teamId}`, other.organizationToken, teamDocument({ name: 'stolen' })));
        expectNotFound(await api(h, 'delete', `/teams/${acme.teamId}`, other.organizationToken));
        const shown = await api(h, 'get', `/teams/${acme.teamId}`, acme.organizationToken);
        expect(shown.body.data.attributes.name).toBe(`${acme.organization}-team`);
      });

      it("deletes a team: 204, then 404, and the team's token stops working", async () => {
        const id = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('gone'));
        const teamToken = await createTeamToken(h, acme.organizationToken, id);
        expect((await api(h, 'get', '/organizations', teamToken)).status).toBe(200);
        const res = await api(h, 'delete', `/teams/${id}`, acme.organizationToken);
        expect(res.status).toBe(204);
        expect(res.text).toBe('');
        expectNotFound(await api(h, 'get', `/teams/${id}`, acme.organizationToken));
        expectNotFound(await api(h, 'delete', `/teams/${id}`, acme.organizationToken));
        expect((await api(h, 'get', '/organizations', teamToken)).status).toBe(401);
      });
    });

    describe('a team token', () => {
      let teamId: string;
      let teamToken: string;
      beforeAll(async () => {
        teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('powerful'), {
          'manage-workspaces': true,
          'manage-run-tasks': true,
          'manage-policy-overrides': true,
        });
        teamToken = await createTeamToken(h, acme.organizationToken, teamId);
      });

      it('cannot manage teams, not even its own (404)', async () => {
        expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/teams`, teamToken));
        expectNotFound(await api(h, 'post', `/organizations/${acme.organization}/teams`, teamToken, teamDocument({ name: 'nope' })));
        expectNotFound(await api(h, 'get', `/teams/${teamId}`, teamToken));
        expectNotFound(await api(h, 'patch', `/teams/${teamId}`, teamToken, teamDocument({ name: 'renamed-by-itself' })));
        expectNotFound(await api(h, 'delete', `/teams/${teamId}`, teamToken));
        expectNotFound(await api(h, 'get', `/teams/${acme.teamId}`, teamToken));
        const shown = await api(h, 'get', `/teams/${teamId}`, acme.organizationToken);
        expect(shown.status).toBe(200);
        expect(shown.body.data.attributes.name).not.toBe('renamed-by-itself');
      });

      it('cannot manage team tokens (404)', async () => {
        expectNotFound(await api(h, 'post', `/teams/${teamId}/authentication-token`, teamToken));
        expectNotFound(await api(h, 'get', `/teams/${teamId}/authentication-token`, teamToken));
        expectNotFound(await api(h, 'delete', `/teams/${teamId}/authentication-token`, teamToken));
        expect((await api(h, 'get', '/organizations', teamToken)).status).toBe(200);
      });
    });
  });

  describe('team authentication token', () => {
    it('creates (201, token once), shows metadata, regenerates (old 401) and revokes (204, then 404)', async () => {
      const id = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('lifecycle'));
      const created = await api(h, 'post', `/teams/${id}/authentication-token`, acme.organizationToken, {
        data: { type: 'authentication-tokens', attributes: { description: 'deploy' } },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.type).toBe('authentication-tokens');
      const first = created.body.data.attributes.token as string;
      expect(first).toMatch(TOKEN_SHAPE);
      expect((await api(h, 'get', '/organizations', first)).status).toBe(200);

      // Its team, and its creator: the organization token's service user.
      const relationships = {
        team: { data: { type: 'teams', id } },
        'created-by': { data: { type: 'users', id: expect.stringMatching(/^user-api-org-/) } },
      };
      expect(created.body.data.relationships).toEqual(relationships);
      const shown = await api(h, 'get', `/teams/${id}/authentication-token`, acme.organizationToken);
      expect(shown.status).toBe(200);
      expect(shown.body.data.id).toBe(created.body.data.id);
      expect(shown.body.data.relationships).toEqual(relationships);
      expect(shown.body.data.attributes.token).toBeNull();
      expect(shown.body.data.attributes.description).toBe('deploy');

      const second = await createTeamToken(h, h.adminToken, id);
      expect(second).not.toBe(first);
      const old = await api(h, 'get', '/organizations', first);
      expect(old.status).toBe(401);
      expect(old.body).toEqual(UNAUTHORIZED);
      expect((await api(h, 'get', '/organizations', second)).status).toBe(200);
      expect((await api(h, 'get', `/teams/${id}/authentication-token`, acme.organizationToken)).body.data.id).not.toBe(
        created.body.data.id,
      );

      const revoked = await api(h, 'delete', `/teams/${id}/authentication-token`, acme.organizationToken);
      expect(revoked.status).toBe(204);
      expect((await api(h, 'get', '/organizations', second)).status).toBe(401);
      expectNotFound(await api(h, 'get', `/teams/${id}/authentication-token`, acme.organizationToken));
      expectNotFound(await api(h, 'delete', `/teams/${id}/authentication-token`, acme.organizationToken));
    });

    it('answers 404 for a team without a token', async () => {
      const id = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('tokenless'));
      expectNotFound(await api(h, 'get', `/teams/${id}/authentication-token`, acme.organizationToken));
    });

    it("answers 404 for another organization's team and a missing team", async () => {
      expectNotFound(await api(h, 'post', `/teams/${acme.teamId}/authentication-token`, other.organizationToken));
      expectNotFound(await api(h, 'get', `/teams/${acme.teamId}/authentication-token`, other.organizationToken));
      expectNotFound(await api(h, 'delete', `/teams/${acme.teamId}/authentication-token`, other.organizationToken));
      expectNotFound(await api(h, 'post', '/teams/team-missing00000000/authentication-token', h.adminToken));
    });

    it('answers 422 with a pointer for an invalid expiry', async () => {
      const res = await api(h, 'post', `/teams/${acme.teamId}/authentication-token`, acme.organizationToken, {
        data: { type: 'authentication-tokens', attributes: { 'expired-at': 12 } },
      });
      expectError(res, 422, '/data/attributes/expired-at');
    });
  });

  describe('team workspace access', () => {
    let workspaceId: string;
    let otherWorkspaceId: string;
    beforeAll(async () => {
      workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, 'access-ws');
      otherWorkspaceId = other.workspaceId;
    });

    describe('POST /team-workspaces', () => {
      it.each([
        ['read', 'read', false],
        ['plan', 'plan', false],
        ['write', 'apply', false],
        ['admin', 'apply', true],
      ])('grants %s access with runs=%s and run-tasks=%s implied', async (access, runs, runTasks) => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName(`access-${access}`));
        const res = await api(
          h,
          'post',
          '/team-workspaces',
          acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, { access }),
        );
        expect(res.status).toBe(201);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body.data.type).toBe('team-workspaces');
        expect(res.body.data.id).toMatch(/^tws-/);
        expect(res.body.data.attributes).toMatchObject({ access, runs, 'run-tasks': runTasks });
        expect(res.body.data.relationships.team.data).toEqual({ type: 'teams', id: teamId });
        expect(res.body.data.relationships.workspace.data).toEqual({ type: 'workspaces', id: workspaceId });
      });

      it('grants custom access with the permissions as given, defaulting to read', async () => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('custom'));
        const res = await api(
          h,
          'post',
          '/team-workspaces',
          acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, { access: 'custom', runs: 'plan', 'run-tasks': 'true' }),
        );
        expect(res.status).toBe(201);
        expect(res.body.data.attributes).toMatchObject({ access: 'custom', runs: 'plan', 'run-tasks': true });

        const bareTeam = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('bare'));
        const bare = await api(h, 'post', '/team-workspaces', h.adminToken, teamWorkspaceDocument(bareTeam, workspaceId));
        expect(bare.status).toBe(201);
        expect(bare.body.data.attributes).toMatchObject({ access: 'custom', runs: 'read', 'run-tasks': false });
      });

      it('answers 422 when the team already has access to the workspace', async () => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('twice'));
        await grantWorkspace(h, acme.organizationToken, teamId, workspaceId, { access: 'read' });
        const res = await api(
          h,
          'post',
          '/team-workspaces',
          acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, { access: 'admin' }),
        );
        expectError(res, 422, '/data/relationships/workspace');
        const list = await api(h, 'get', `/team-workspaces?filter[team][id]=${teamId}`, acme.organizationToken);
        expect(list.body.data).toHaveLength(1);
        expect(list.body.data[0].attributes.access).toBe('read');
      });

      it('answers 404 for a workspace or a team of another organization', async () => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('cross'));
        expectNotFound(
          await api(
            h,
            'post',
            '/team-workspaces',
            acme.organizationToken,
            teamWorkspaceDocument(teamId, otherWorkspaceId, { access: 'read' }),
          ),
        );
        expectNotFound(
          await api(h, 'post', '/team-workspaces', h.adminToken, teamWorkspaceDocument(teamId, otherWorkspaceId, { access: 'read' })),
        );
        expectNotFound(
          await api(
            h,
            'post',
            '/team-workspaces',
            acme.organizationToken,
            teamWorkspaceDocument(other.teamId, workspaceId, { access: 'read' }),
          ),
        );
        expectNotFound(
          await api(h, 'post', '/team-workspaces', other.organizationToken, teamWorkspaceDocument(teamId, workspaceId, { access: 'read' })),
        );
        expectNotFound(
          await api(
            h,
            'post',
            '/team-workspaces',
            acme.organizationToken,
            teamWorkspaceDocument(teamId, 'ws-missing0000000000', { access: 'read' }),
          ),
        );
      });

      it('answers 404 to a team token, even one that manages workspaces', async () => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('self-grant'), {
          'manage-workspaces': true,
        });
        const teamToken = await createTeamToken(h, acme.organizationToken, teamId);
        expectNotFound(
          await api(h, 'post', '/team-workspaces', teamToken, teamWorkspaceDocument(teamId, workspaceId, { access: 'admin' })),
        );
      });

      it.each([
        ['an unknown access level', teamWorkspaceDocumentFor({ access: 'owner' }), '/data/attributes/access'],
        ['an unknown runs level', teamWorkspaceDocumentFor({ access: 'custom', runs: 'destroy' }), '/data/attributes/runs'],
        ['a non-boolean run-tasks', teamWorkspaceDocumentFor({ access: 'custom', 'run-tasks': 'sometimes' }), '/data/attributes/run-tasks'],
        [
          'a missing team relationship',
          { data: { type: 'team-workspaces', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } } } },
          '/data/relationships/team',
        ],
        [
          'a workspace relationship of the wrong type',
          {
            data: {
              type: 'team-workspaces',
              attributes: {},
              relationships: { team: { data: { type: 'teams', id: 'team-x' } }, workspace: { data: { type: 'runs', id: 'ws-x' } } },
            },
          },
          '/data/relationships/workspace/data/type',
        ],
      ])('answers 422 with a pointer for %s', async (_label, document, pointer) => {
        expectError(await api(h, 'post', '/team-workspaces', acme.organizationToken, document), 422, pointer);
      });
    });

    describe('GET, PATCH and DELETE /team-workspaces', () => {
      let listWorkspace: string;
      let teamA: string;
      let teamB: string;
      let accessA: string;
      let accessB: string;
      let accessElsewhere: string;
      beforeAll(async () => {
        listWorkspace = await createWorkspace(h, acme.organization, acme.organizationToken, 'listed-ws');
        const elsewhere = await createWorkspace(h, acme.organization, acme.organizationToken, 'elsewhere-ws');
        teamA = await createTeam(h, acme.organization, acme.organizationToken, 'list-a');
        teamB = await createTeam(h, acme.organization, acme.organizationToken, 'list-b');
        accessA = await grantWorkspace(h, acme.organizationToken, teamA, listWorkspace, { access: 'read' });
        accessB = await grantWorkspace(h, acme.organizationToken, teamB, listWorkspace, { access: 'write' });
        accessElsewhere = await grantWorkspace(h, acme.organizationToken, teamA, elsewhere, { access: 'plan' });
        await grantWorkspace(h, other.organizationToken, other.teamId, other.workspaceId, { access: 'admin' });
      });

      it('lists the access of one workspace with filter[workspace][id]', async () => {
        const res = await api(h, 'get', `/team-workspaces?filter[workspace][id]=${listWorkspace}`, acme.organizationToken);
        expect(res.status).toBe(200);
        expect(res.body.data.map((row: { id: string }) => row.id)).toEqual([accessA, accessB]);
        expect(res.body.meta.pagination['total-count']).toBe(2);
      });

      it('lists the access of one team with filter[team][id]', async () => {
        const res = await api(h, 'get', `/team-workspaces?filter[team][id]=${teamA}`, acme.organizationToken);
        expect(res.status).toBe(200);
        expect(res.body.data.map((row: { id: string }) => row.id)).toEqual([accessA, accessElsewhere]);
      });

      it("never lists another organization's access", async () => {
        const unfiltered = await api(h, 'get', '/team-workspaces?page[size]=100', other.organizationToken);
        expect(unfiltered.status).toBe(200);
        expect(unfiltered.body.data).toHaveLength(1);
        expect(unfiltered.body.data[0].relationships.workspace.data.id).toBe(other.workspaceId);
        const filtered = await api(h, 'get', `/team-workspaces?filter[workspace][id]=${listWorkspace}`, other.organizationToken);
        expect(filtered.status).toBe(200);
        expect(filtered.body.data).toEqual([]);
        const byTeam = await api(h, 'get', `/team-workspaces?filter[team][id]=${teamA}`, other.organizationToken);
        expect(byTeam.body.data).toEqual([]);
      });

      it('shows team tokens no access rows', async () => {
        const teamToken = await createTeamToken(h, acme.organizationToken, teamA);
        const res = await api(h, 'get', `/team-workspaces?filter[workspace][id]=${listWorkspace}`, teamToken);
        expect(res.status).toBe(200);
        expect(res.body.data).toEqual([]);
        expect(res.body.meta.pagination['total-count']).toBe(0);
      });

      it('answers 422 for a filter given twice', async () => {
        const res = await api(
          h,
          'get',
          `/team-workspaces?filter[workspace][id]=${listWorkspace}&filter[workspace][id]=${listWorkspace}`,
          acme.organizationToken,
        );
        expectError(res, 422);
        expect(res.body.errors[0].source).toEqual({ parameter: 'filter[workspace][id]' });
        expect(res.body.errors[0].detail).toBe('filter[workspace][id] must be given at most once.');
      });

      it('answers 422 naming the filter for one longer than an id', async () => {
        const res = await api(h, 'get', `/team-workspaces?filter[team][id]=${'t'.repeat(65)}`, acme.organizationToken);
        expectError(res, 422);
        expect(res.body.errors[0].source).toEqual({ parameter: 'filter[team][id]' });
        expect(res.body.errors[0].detail).toBe('filter[team][id] is longer than an id (64 characters).');
      });

      it('shows one access row, 404 to another organization', async () => {
        const res = await api(h, 'get', `/team-workspaces/${accessB}`, acme.organizationToken);
        expect(res.status).toBe(200);
        expect(res.body.data.id).toBe(accessB);
        expect(res.body.data.attributes).toMatchObject({ access: 'write', runs: 'apply', 'run-tasks': false });
        expectNotFound(await api(h, 'get', `/team-workspaces/${accessB}`, other.organizationToken));
        expectNotFound(await api(h, 'get', '/team-workspaces/tws-missing000000000', h.adminToken));
      });

      it('PATCH changes the access level and re-derives the implied permissions', async () => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('patch-access'));
        const id = await grantWorkspace(h, acme.organizationToken, teamId, listWorkspace, { access: 'read' });
        const toAdmin = await api(h, 'patch', `/team-workspaces/${id}`, acme.organizationToken, {
          data: { type: 'team-workspaces', attributes: { access: 'admin' } },
        });
        expect(toAdmin.status).toBe(200);
        expect(toAdmin.body.data.attributes).toMatchObject({ access: 'admin', runs: 'apply', 'run-tasks': true });

        const toCustom = await api(h, 'patch', `/team-workspaces/${id}`, acme.organizationToken, {
          data: { type: 'team-workspaces', attributes: { access: 'custom', runs: 'plan' } },
        });
        expect(toCustom.status).toBe(200);
        expect(toCustom.body.data.attributes).toMatchObject({ access: 'custom', runs: 'plan', 'run-tasks': true });

        const tweak = await api(h, 'patch', `/team-workspaces/${id}`, acme.organizationToken, {
          data: { type: 'team-workspaces', attributes: { 'run-tasks': false } },
        });
        expect(tweak.status).toBe(200);
        expect(tweak.body.data.attributes).toMatchObject({ access: 'custom', runs: 'plan', 'run-tasks': false });

        const shown = await api(h, 'get', `/team-workspaces/${id}`, acme.organizationToken);
        expect(shown.body.data.attributes).toMatchObject({ access: 'custom', runs: 'plan', 'run-tasks': false });
      });

      it('PATCH answers 422 for an invalid level and 404 for another organization', async () => {
        expectError(
          await api(h, 'patch', `/team-workspaces/${accessA}`, acme.organizationToken, {
            data: { type: 'team-workspaces', attributes: { access: 'superuser' } },
          }),
          422,
          '/data/attributes/access',
        );
        expectNotFound(
          await api(h, 'patch', `/team-workspaces/${accessA}`, other.organizationToken, {
            data: { type: 'team-workspaces', attributes: { access: 'admin' } },
          }),
        );
        const shown = await api(h, 'get', `/team-workspaces/${accessA}`, acme.organizationToken);
        expect(shown.body.data.attributes.access).toBe('read');
      });

      // As HCP: custom permissions with a fixed level would be stored as something else than asked.
      it.each<[Record<string, unknown>, string]>([
        [{ access: 'read', runs: 'apply' }, '/data/attributes/runs'],
        [{ access: 'admin', 'run-tasks': false }, '/data/attributes/run-tasks'],
        [{ runs: 'plan' }, '/data/attributes/runs'],
      ])('answers 422 for custom permissions with a fixed level (%j), creating and changing nothing', async (attributes, pointer) => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('fixed-level'));
        const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('fixed-level'));
        const created = await api(
          h,
          'post',
          '/team-workspaces',
          acme.organizationToken,
          teamWorkspaceDocument(teamId, workspaceId, attributes),
        );
        if (attributes['access'] !== undefined) {
          const error = expectError(created, 422, pointer);
          // HCP's text: go-tfe's tests compare it.
          expect(`${error.title}\n\n${error.detail}`).toBe(
            `invalid attribute\n\n${pointer.endsWith('runs') ? 'Runs' : 'Run tasks'} is read-only when access level is '${String(attributes['access'])}'; use the 'custom' access level to set this attribute.`,
          );
          const listed = await api(h, 'get', `/team-workspaces?filter%5Bworkspace%5D%5Bid%5D=${workspaceId}`, acme.organizationToken);
          expect(listed.body.data).toEqual([]);
        } else {
          // No level given: the access is custom, and the permission is taken.
          expect(created.status).toBe(201);
          expect(created.body.data.attributes).toMatchObject({ access: 'custom', runs: 'plan' });
        }
        const id = await grantWorkspace(
          h,
          acme.organizationToken,
          teamId,
          await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('fixed')),
          { access: 'read' },
        );
        expectError(
          await api(h, 'patch', `/team-workspaces/${id}`, acme.organizationToken, { data: { type: 'team-workspaces', attributes } }),
          422,
          pointer,
        );
        const shown = await api(h, 'get', `/team-workspaces/${id}`, acme.organizationToken);
        expect(shown.body.data.attributes).toMatchObject({ access: 'read', runs: 'read', 'run-tasks': false });
      });

      it('DELETE removes the access: 204, then 404, and the team loses the workspace', async () => {
        const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('revoked-access'));
        const teamToken = await createTeamToken(h, acme.organizationToken, teamId);
        const id = await grantWorkspace(h, acme.organizationToken, teamId, listWorkspace, { access: 'read' });
        expect((await api(h, 'get', `/workspaces/${listWorkspace}`, teamToken)).status).toBe(200);

        expectNotFound(await api(h, 'delete', `/team-workspaces/${id}`, other.organizationToken));
        expectNotFound(await api(h, 'delete', `/team-workspaces/${id}`, teamToken));
        const res = await api(h, 'delete', `/team-workspaces/${id}`, acme.organizationToken);
        expect(res.status).toBe(204);
        expect(res.text).toBe('');
        expectNotFound(await api(h, 'get', `/team-workspaces/${id}`, acme.organizationToken));
        expectNotFound(await api(h, 'delete', `/team-workspaces/${id}`, acme.organizationToken));
        expectNotFound(await api(h, 'get', `/workspaces/${listWorkspace}`, teamToken));
      });
    });
  });
});

function teamWorkspaceDocumentFor(attributes: Record<string, unknown>) {
  return teamWorkspaceDocument('team-placeholder', 'ws-placeholder', attributes);
}
