import { describe, expect, it } from '@jest/globals';
import { api, createOrganization, createOrganizationToken, createTeam, createTeamToken, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';
import { TOKEN_SHAPE } from './teams-and-tokens/documents.ts';
import { useTeamsAndTokens } from './teams-and-tokens/setup.ts';

describe('teams, tokens and team access', () => {
  const g = useTeamsAndTokens();

  describe('organization authentication token', () => {
    it('creates a token (201) shown once, then shows only its metadata', async () => {
      const name = await createOrganization(g.h, uniqueName('tokens'));
      const created = await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, {
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
      expect((await api(g.h, 'get', `/organizations/${name}`, token)).status).toBe(200);

      const shown = await api(g.h, 'get', `/organizations/${name}/authentication-token`, token);
      expect(shown.status).toBe(200);
      expect(shown.body.data.id).toBe(created.body.data.id);
      expect(shown.body.data.attributes.token).toBeNull();
      expect(shown.body.data.attributes.description).toBe('CI');
      expect(shown.body.data.attributes['created-at']).toBe(created.body.data.attributes['created-at']);
    });

    it('creates a token without a body or with an empty object', async () => {
      const name = await createOrganization(g.h, uniqueName('nobody'));
      const res = await g.h.http
        .post(`/api/v2/organizations/${name}/authentication-token`)
        .set('Authorization', `Bearer ${g.h.adminToken}`);
      expect(res.status).toBe(201);
      expect(res.body.data.attributes.token).toMatch(TOKEN_SHAPE);
      expect(res.body.data.attributes.description).toBeNull();
      expect(res.body.data.attributes['expired-at']).toBeNull();
      const empty = await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, {});
      expect(empty.status).toBe(201);
      expect(empty.body.data.attributes.token).toMatch(TOKEN_SHAPE);
    });

    // go-tfe sends `""`, HCP's documentation `authentication-token`; the answer is always `authentication-tokens`.
    it.each(['', 'authentication-token', 'authentication-tokens'])(
      'accepts data.type %j for organization and team tokens',
      async (type) => {
        const name = await createOrganization(g.h, uniqueName('types'));
        const organizationToken = await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, {
          data: { type, attributes: { 'expired-at': '2999-01-01T00:00:00Z' } },
        });
        expect(organizationToken.status).toBe(201);
        expect(organizationToken.body.data.type).toBe('authentication-tokens');
        expect(organizationToken.body.data.attributes['expired-at']).toBe('2999-01-01T00:00:00.000Z');
        const team = await createTeam(g.h, name, g.h.adminToken, uniqueName('types'));
        const teamToken = await api(g.h, 'post', `/teams/${team}/authentication-token`, g.h.adminToken, { data: { type } });
        expect(teamToken.status).toBe(201);
        expect(teamToken.body.data.type).toBe('authentication-tokens');
        expect(teamToken.body.data.attributes.token).toMatch(TOKEN_SHAPE);
      },
    );

    it('refuses a ?token= other than audit-trails (400 naming the parameter) and issues or revokes nothing', async () => {
      const name = await createOrganization(g.h, uniqueName('audit'));
      const token = await createOrganizationToken(g.h, name);
      for (const method of ['post', 'get', 'delete'] as const) {
        const error = expectError(await api(g.h, method, `/organizations/${name}/authentication-token?token=session`, g.h.adminToken), 400);
        expect(error.source).toEqual({ parameter: 'token' });
        expect(error.detail).toContain('token=session');
      }
      // The ordinary token is still the active one.
      expect((await api(g.h, 'get', '/organizations', token)).status).toBe(200);
    });

    it('answers 422 for a body that is neither empty nor a token document', async () => {
      const name = await createOrganization(g.h, uniqueName('junk'));
      expectError(
        await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, { description: 'not wrapped' }),
        422,
        '/data',
      );
      expectError(
        await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, { data: { type: 'teams', attributes: {} } }),
        422,
        '/data/type',
      );
    });

    it('regenerating revokes the previous token (old token 401, new token works)', async () => {
      const name = await createOrganization(g.h, uniqueName('regen'));
      const first = await createOrganizationToken(g.h, name);
      const firstMeta = await api(g.h, 'get', `/organizations/${name}/authentication-token`, first);
      const second = await createOrganizationToken(g.h, name);
      expect(second).not.toBe(first);

      const old = await api(g.h, 'get', `/organizations/${name}`, first);
      expect(old.status).toBe(401);
      expect(old.body).toEqual(UNAUTHORIZED);
      expect((await api(g.h, 'get', `/organizations/${name}`, second)).status).toBe(200);
      const meta = await api(g.h, 'get', `/organizations/${name}/authentication-token`, second);
      expect(meta.body.data.id).not.toBe(firstMeta.body.data.id);
    });

    it('lets an organization token regenerate itself, which revokes the caller', async () => {
      const name = await createOrganization(g.h, uniqueName('self'));
      const token = await createOrganizationToken(g.h, name);
      const res = await api(g.h, 'post', `/organizations/${name}/authentication-token`, token);
      expect(res.status).toBe(201);
      expect((await api(g.h, 'get', `/organizations/${name}`, token)).status).toBe(401);
      expect((await api(g.h, 'get', `/organizations/${name}`, res.body.data.attributes.token)).status).toBe(200);
    });

    it('DELETE revokes the token: 204, then the token is 401 and GET/DELETE answer 404', async () => {
      const name = await createOrganization(g.h, uniqueName('revoke'));
      const token = await createOrganizationToken(g.h, name);
      const res = await api(g.h, 'delete', `/organizations/${name}/authentication-token`, g.h.adminToken);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect((await api(g.h, 'get', `/organizations/${name}`, token)).status).toBe(401);
      expectNotFound(await api(g.h, 'get', `/organizations/${name}/authentication-token`, g.h.adminToken));
      expectNotFound(await api(g.h, 'delete', `/organizations/${name}/authentication-token`, g.h.adminToken));
    });

    it('answers 404 to team tokens and to other organizations, for every method', async () => {
      const teamToken = await createTeamToken(
        g.h,
        g.acme.organizationToken,
        await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('t'), { 'manage-workspaces': true }),
      );
      for (const token of [teamToken, g.other.organizationToken]) {
        expectNotFound(await api(g.h, 'post', `/organizations/${g.acme.organization}/authentication-token`, token));
        expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/authentication-token`, token));
        expectNotFound(await api(g.h, 'delete', `/organizations/${g.acme.organization}/authentication-token`, token));
      }
      expect((await api(g.h, 'get', `/organizations/${g.acme.organization}`, g.acme.organizationToken)).status).toBe(200);
      expectNotFound(await api(g.h, 'post', '/organizations/missing/authentication-token', g.h.adminToken));
    });

    it('answers 401 without a token', async () => {
      const res = await api(g.h, 'post', `/organizations/${g.acme.organization}/authentication-token`);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    });

    it('answers 422 with a pointer for an invalid expiry or description', async () => {
      const name = await createOrganization(g.h, uniqueName('invalid'));
      const token = await createOrganizationToken(g.h, name);
      const badDate = await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, {
        data: { type: 'authentication-tokens', attributes: { 'expired-at': 'tomorrow' } },
      });
      expectError(badDate, 422, '/data/attributes/expired-at');
      const badDescription = await api(g.h, 'post', `/organizations/${name}/authentication-token`, g.h.adminToken, {
        data: { type: 'authentication-tokens', attributes: { description: 5 } },
      });
      expectError(badDescription, 422, '/data/attributes/description');
      // A rejected request revokes nothing.
      expect((await api(g.h, 'get', `/organizations/${name}`, token)).status).toBe(200);
    });
  });

  describe('team authentication token', () => {
    it('creates (201, token once), shows metadata, regenerates (old 401) and revokes (204, then 404)', async () => {
      const id = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('lifecycle'));
      const created = await api(g.h, 'post', `/teams/${id}/authentication-token`, g.acme.organizationToken, {
        data: { type: 'authentication-tokens', attributes: { description: 'deploy' } },
      });
      expect(created.status).toBe(201);
      expect(created.body.data.type).toBe('authentication-tokens');
      const first = created.body.data.attributes.token as string;
      expect(first).toMatch(TOKEN_SHAPE);
      expect((await api(g.h, 'get', '/organizations', first)).status).toBe(200);

      // Its team, and its creator: the organization token's service user.
      const relationships = {
        team: { data: { type: 'teams', id } },
        'created-by': { data: { type: 'users', id: expect.stringMatching(/^user-api-org-/) } },
      };
      expect(created.body.data.relationships).toEqual(relationships);
      const shown = await api(g.h, 'get', `/teams/${id}/authentication-token`, g.acme.organizationToken);
      expect(shown.status).toBe(200);
      expect(shown.body.data.id).toBe(created.body.data.id);
      expect(shown.body.data.relationships).toEqual(relationships);
      expect(shown.body.data.attributes.token).toBeNull();
      expect(shown.body.data.attributes.description).toBe('deploy');

      const second = await createTeamToken(g.h, g.h.adminToken, id);
      expect(second).not.toBe(first);
      const old = await api(g.h, 'get', '/organizations', first);
      expect(old.status).toBe(401);
      expect(old.body).toEqual(UNAUTHORIZED);
      expect((await api(g.h, 'get', '/organizations', second)).status).toBe(200);
      expect((await api(g.h, 'get', `/teams/${id}/authentication-token`, g.acme.organizationToken)).body.data.id).not.toBe(
        created.body.data.id,
      );

      const revoked = await api(g.h, 'delete', `/teams/${id}/authentication-token`, g.acme.organizationToken);
      expect(revoked.status).toBe(204);
      expect((await api(g.h, 'get', '/organizations', second)).status).toBe(401);
      expectNotFound(await api(g.h, 'get', `/teams/${id}/authentication-token`, g.acme.organizationToken));
      expectNotFound(await api(g.h, 'delete', `/teams/${id}/authentication-token`, g.acme.organizationToken));
    });

    it('answers 404 for a team without a token', async () => {
      const id = await createTeam(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('tokenless'));
      expectNotFound(await api(g.h, 'get', `/teams/${id}/authentication-token`, g.acme.organizationToken));
    });

    it("answers 404 for another organization's team and a missing team", async () => {
      expectNotFound(await api(g.h, 'post', `/teams/${g.acme.teamId}/authentication-token`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'get', `/teams/${g.acme.teamId}/authentication-token`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'delete', `/teams/${g.acme.teamId}/authentication-token`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'post', '/teams/team-missing00000000/authentication-token', g.h.adminToken));
    });

    it('answers 422 with a pointer for an invalid expiry', async () => {
      const res = await api(g.h, 'post', `/teams/${g.acme.teamId}/authentication-token`, g.acme.organizationToken, {
        data: { type: 'authentication-tokens', attributes: { 'expired-at': 12 } },
      });
      expectError(res, 422, '/data/attributes/expired-at');
    });
  });
});
