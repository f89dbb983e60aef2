import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ApiToken } from '@runtasks/shared/db';
import { API_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createTeam,
  createTeamToken,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { expectError, NOT_FOUND, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';

function organizationDocument(attributes: Record<string, unknown>) {
  return { data: { type: 'organizations', attributes } };
}

describe('organizations API', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let acmeTeamToken: string;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, 'acme');
    other = await seedOrganization(h, 'other');
    acmeTeamToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
  });
  afterAll(async () => {
    await h.close();
  });

  describe('authentication', () => {
    it('answers 401 with one identical body for missing, malformed, unknown and revoked tokens', async () => {
      const name = await createOrganization(h, uniqueName('revoked'));
      const revoked = await createOrganizationToken(h, name);
      const show = await api(h, 'get', `/organizations/${name}`, revoked);
      expect(show.status).toBe(200);
      const revokedCount = await h.orm.em
        .fork()
        .nativeUpdate(
          ApiToken,
          { kind: 'organization', revokedAt: null, organization: show.body.data.attributes['external-id'] },
          { revokedAt: new Date() },
        );
      expect(revokedCount).toBe(1);

      const responses = [
        await api(h, 'get', '/organizations'),
        await api(h, 'get', '/organizations', 'not-a-token'),
        await api(h, 'get', '/organizations', `${API_TOKEN_PREFIX}short`),
        await api(h, 'get', '/organizations', generateToken(API_TOKEN_PREFIX)),
        await api(h, 'get', '/organizations', revoked),
        await h.http.get('/api/v2/organizations').set('Authorization', `Basic ${acme.organizationToken}`),
      ];
      for (const res of responses) {
        expect(res.status).toBe(401);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body).toEqual(UNAUTHORIZED);
      }
    });
  });

  describe('POST /organizations', () => {
    it('lets the site admin create an organization (201) whose id is its name', async () => {
      const name = uniqueName('created');
      const res = await api(h, 'post', '/organizations', h.adminToken, organizationDocument({ name, email: 'owner@example.test' }));
      expect(res.status).toBe(201);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(res.body.data.type).toBe('organizations');
      expect(res.body.data.id).toBe(name);
      expect(res.body.data.attributes).toMatchObject({
        name,
        email: 'owner@example.test',
        edition: 'standard',
        'task-overrides-enabled': false,
      });
      expect(res.body.data.attributes['external-id']).toMatch(/^org-[A-Za-z0-9]{16}$/);
      expect(res.body.data.relationships['entitlement-set'].data).toEqual({
        type: 'entitlement-sets',
        id: res.body.data.attributes['external-id'],
      });
      expect(res.body.data.links.self).toBe(`/api/v2/organizations/${name}`);

      const show = await api(h, 'get', `/organizations/${name}`, h.adminToken);
      expect(show.status).toBe(200);
      expect(show.body.data.attributes['external-id']).toBe(res.body.data.attributes['external-id']);
    });

    it('accepts the edition and task-overrides-enabled (also as strings) and ignores unknown attributes', async () => {
      const name = uniqueName('options');
      const res = await api(
        h,
        'post',
        '/organizations',
        h.adminToken,
        organizationDocument({
          name,
          email: 'x@example.test',
          edition: 'free',
          'task-overrides-enabled': 'true',
          'no-such-setting': 'two_factor_mandatory',
        }),
      );
      expect(res.status).toBe(201);
      expect(res.body.data.attributes.edition).toBe('free');
      expect(res.body.data.attributes['task-overrides-enabled']).toBe(true);
      expect(res.body.data.attributes).not.toHaveProperty('no-such-setting');
    });

    it('answers 404 to an organization token and to a team token, identical to a missing resource', async () => {
      const missing = await api(h, 'get', '/organizations/does-not-exist', h.adminToken);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual(NOT_FOUND);
      for (const token of [acme.organizationToken, acmeTeamToken]) {
        const name = uniqueName('forbidden');
        const res = await api(h, 'post', '/organizations', token, organizationDocument({ name, email: 'x@example.test' }));
        expect(res.status).toBe(404);
        expect(res.body).toEqual(missing.body);
        expect((await api(h, 'get', `/organizations/${name}`, h.adminToken)).status).toBe(404);
      }
    });

    it('answers 422 "has already been taken" for a duplicate name', async () => {
      const res = await api(
        h,
        'post',
        '/organizations',
        h.adminToken,
        organizationDocument({ name: acme.organization, email: 'dup@example.test' }),
      );
      expectError(res, 422, '/data/attributes/name');
      expect(res.body.errors[0].detail).toContain('has already been taken');
    });

    it.each([
      ['an invalid email', { email: 'not-an-email' }, '/data/attributes/email'],
      ['a missing email', { email: undefined }, '/data/attributes/email'],
      ['a name with spaces', { name: 'bad name' }, '/data/attributes/name'],
      ['an empty name', { name: '' }, '/data/attributes/name'],
      ['a name longer than 40 characters', { name: 'n'.repeat(41) }, '/data/attributes/name'],
      ['a numeric name', { name: 42 }, '/data/attributes/name'],
      ['an unknown edition', { edition: 'enterprise' }, '/data/attributes/edition'],
      ['a non-boolean task-overrides-enabled', { 'task-overrides-enabled': 'yes' }, '/data/attributes/task-overrides-enabled'],
    ])('answers 422 with a pointer for %s', async (_label, override, pointer) => {
      const attributes: Record<string, unknown> = { name: uniqueName('invalid'), email: 'valid@example.test', ...override };
      const res = await api(h, 'post', '/organizations', h.adminToken, organizationDocument(attributes));
      expectError(res, 422, pointer);
      if (typeof attributes['name'] === 'string' && /^[A-Za-z0-9_-]{1,40}$/.test(attributes['name'])) {
        expect((await api(h, 'get', `/organizations/${attributes['name']}`, h.adminToken)).status).toBe(404);
      }
    });

    it('answers 422 for a document of the wrong type and 400 for malformed JSON', async () => {
      const wrongType = await api(h, 'post', '/organizations', h.adminToken, {
        data: { type: 'workspaces', attributes: { name: uniqueName('t'), email: 'a@example.test' } },
      });
      expectError(wrongType, 422, '/data/type');
      const malformed = await h.http
        .post('/api/v2/organizations')
        .set('Authorization', `Bearer ${h.adminToken}`)
        .set('Content-Type', JSON_API)
        .send('{"data":');
      expectError(malformed, 400);
    });

    it('answers 415 for a body that is not JSON', async () => {
      const res = await h.http
        .post('/api/v2/organizations')
        .set('Authorization', `Bearer ${h.adminToken}`)
        .set('Content-Type', 'text/plain')
        .send('name=x');
      expectError(res, 415);
    });
  });

  describe('GET /organizations', () => {
    it('shows the site admin every organization, with pagination meta', async () => {
      const res = await api(h, 'get', '/organizations?page[size]=100', h.adminToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toContain(JSON_API);
      const names = res.body.data.map((org: { id: string }) => org.id);
      expect(names).toEqual(expect.arrayContaining([acme.organization, other.organization]));
      expect(res.body.meta.pagination['total-count']).toBe(names.length);
      expect(res.body.meta.pagination['current-page']).toBe(1);
    });

    it('paginates: page[size]=1 gives one organization per page with links', async () => {
      const all = await api(h, 'get', '/organizations?page[size]=100', h.adminToken);
      const total = all.body.meta.pagination['total-count'] as number;
      expect(total).toBeGreaterThanOrEqual(2);
      const second = await api(h, 'get', '/organizations?page[size]=1&page[number]=2', h.adminToken);
      expect(second.status).toBe(200);
      expect(second.body.data).toHaveLength(1);
      expect(second.body.data[0].id).toBe(all.body.data[1].id);
      expect(second.body.meta.pagination).toEqual({
        'current-page': 2,
        'page-size': 1,
        'prev-page': 1,
        'next-page': total > 2 ? 3 : null,
        'total-pages': total,
        'total-count': total,
      });
      expect(second.body.links.first).toContain('page%5Bnumber%5D=1');
    });

    it('answers 422 with a parameter source for an invalid page size', async () => {
      for (const query of ['page[size]=0', 'page[size]=101', 'page[size]=abc', 'page[number]=-1']) {
        const res = await api(h, 'get', `/organizations?${query}`, h.adminToken);
        expectError(res, 422);
        expect(res.body.errors[0].source.parameter).toMatch(/^page\[(size|number)\]$/);
      }
    });

    it('shows an organization token only its own organization', async () => {
      const res = await api(h, 'get', '/organizations', acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((org: { id: string }) => org.id)).toEqual([acme.organization]);
      expect(res.body.meta.pagination['total-count']).toBe(1);
    });

    it('shows a team token only its own organization', async () => {
      const res = await api(h, 'get', '/organizations', acmeTeamToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((org: { id: string }) => org.id)).toEqual([acme.organization]);
    });
  });

  describe('GET /organizations/:name', () => {
    it('shows the organization to the admin, its owner and its teams', async () => {
      for (const token of [h.adminToken, acme.organizationToken, acmeTeamToken]) {
        const res = await api(h, 'get', `/organizations/${acme.organization}`, token);
        expect(res.status).toBe(200);
        expect(res.body.data.id).toBe(acme.organization);
        expect(res.body.data.attributes.email).toBe(`${acme.organization}@example.test`);
      }
    });

    it("answers 404 for another organization's name, identical to a missing one", async () => {
      const foreign = await api(h, 'get', `/organizations/${other.organization}`, acme.organizationToken);
      const missing = await api(h, 'get', '/organizations/nope', acme.organizationToken);
      expect(foreign.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(foreign.body).toEqual(NOT_FOUND);
      expect(missing.body).toEqual(foreign.body);
    });

    it('looks organizations up by name, not by external id', async () => {
      const show = await api(h, 'get', `/organizations/${acme.organization}`, h.adminToken);
      const byExternalId = await api(h, 'get', `/organizations/${show.body.data.attributes['external-id']}`, h.adminToken);
      expect(byExternalId.status).toBe(404);
    });
  });

  describe('PATCH /organizations/:name', () => {
    let fixture: Fixture;
    let teamToken: string;
    beforeAll(async () => {
      fixture = await seedOrganization(h, 'patchable');
      teamToken = await createTeamToken(
        h,
        fixture.organizationToken,
        await createTeam(h, fixture.organization, fixture.organizationToken, 'patch-team', { 'manage-workspaces': true }),
      );
    });

    it('lets the owner change the email and task-overrides-enabled', async () => {
      const res = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ email: 'new@example.test', 'task-overrides-enabled': true }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.attributes.email).toBe('new@example.test');
      expect(res.body.data.attributes['task-overrides-enabled']).toBe(true);
      const show = await api(h, 'get', `/organizations/${fixture.organization}`, fixture.organizationToken);
      expect(show.body.data.attributes.email).toBe('new@example.test');
      expect(show.body.data.attributes['task-overrides-enabled']).toBe(true);

      const off = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ 'task-overrides-enabled': 'false' }),
      );
      expect(off.status).toBe(200);
      expect(off.body.data.attributes['task-overrides-enabled']).toBe(false);
      expect(off.body.data.attributes.email).toBe('new@example.test');
    });

    it('answers 422 to an owner changing the edition, and leaves it unchanged', async () => {
      const res = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ edition: 'free' }),
      );
      expectError(res, 422, '/data/attributes/edition');
      const show = await api(h, 'get', `/organizations/${fixture.organization}`, fixture.organizationToken);
      expect(show.body.data.attributes.edition).toBe('standard');
    });

    it('lets the site admin change the edition', async () => {
      const toFree = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        h.adminToken,
        organizationDocument({ edition: 'free' }),
      );
      expect(toFree.status).toBe(200);
      expect(toFree.body.data.attributes.edition).toBe('free');
      const back = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        h.adminToken,
        organizationDocument({ edition: 'standard' }),
      );
      expect(back.status).toBe(200);
      expect(back.body.data.attributes.edition).toBe('standard');
    });

    it('ignores unknown attributes and accepts the unchanged name', async () => {
      const res = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        fixture.organizationToken,
        organizationDocument({ name: fixture.organization, 'owners-team-saml-role-id': 'x' }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(fixture.organization);
    });

    it('answers 422 with a pointer for an invalid new name, a bad email and a wrongly typed flag', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ name: 'not a name' }, '/data/attributes/name'],
        [{ email: 'nope' }, '/data/attributes/email'],
        [{ email: 7 }, '/data/attributes/email'],
        [{ 'task-overrides-enabled': 'maybe' }, '/data/attributes/task-overrides-enabled'],
      ];
      for (const [attributes, pointer] of cases) {
        const res = await api(
          h,
          'patch',
          `/organizations/${fixture.organization}`,
          fixture.organizationToken,
          organizationDocument(attributes),
        );
        expectError(res, 422, pointer);
      }
      expect((await api(h, 'get', `/organizations/${fixture.organization}`, h.adminToken)).status).toBe(200);
    });

    it('answers 404 to a team token (even with organization access) and to another organization', async () => {
      const byTeam = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        teamToken,
        organizationDocument({ email: 'team@example.test' }),
      );
      expect(byTeam.status).toBe(404);
      expect(byTeam.body).toEqual(NOT_FOUND);
      const byOther = await api(
        h,
        'patch',
        `/organizations/${fixture.organization}`,
        other.organizationToken,
        organizationDocument({ email: 'other@example.test' }),
      );
      expect(byOther.status).toBe(404);
      expect(byOther.body).toEqual(NOT_FOUND);
      const show = await api(h, 'get', `/organizations/${fixture.organization}`, h.adminToken);
      expect(show.body.data.attributes.email).not.toMatch(/^(team|other)@/);
    });

    it('answers 404 for a missing organization', async () => {
      const res = await api(h, 'patch', '/organizations/missing-org', h.adminToken, organizationDocument({ email: 'a@example.test' }));
      expect(res.status).toBe(404);
      expect(res.body).toEqual(NOT_FOUND);
    });
  });

  describe('DELETE /organizations/:name', () => {
    it('lets the owner delete its organization: 204, then 404, and its token stops working', async () => {
      const fixture = await seedOrganization(h, 'doomed');
      const res = await api(h, 'delete', `/organizations/${fixture.organization}`, fixture.organizationToken);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      const show = await api(h, 'get', `/organizations/${fixture.organization}`, h.adminToken);
      expect(show.status).toBe(404);
      expect(show.body).toEqual(NOT_FOUND);
      expect((await api(h, 'get', `/workspaces/${fixture.workspaceId}`, h.adminToken)).status).toBe(404);
      const again = await api(h, 'delete', `/organizations/${fixture.organization}`, h.adminToken);
      expect(again.status).toBe(404);
      expect((await api(h, 'get', '/organizations', fixture.organizationToken)).status).toBe(401);
    });

    it('lets the site admin delete an organization', async () => {
      const name = await createOrganization(h, uniqueName('admin-deleted'));
      expect((await api(h, 'delete', `/organizations/${name}`, h.adminToken)).status).toBe(204);
      expect((await api(h, 'get', `/organizations/${name}`, h.adminToken)).status).toBe(404);
    });

    it('answers 404 to a team token and to another organization, and deletes nothing', async () => {
      const byTeam = await api(h, 'delete', `/organizations/${acme.organization}`, acmeTeamToken);
      expect(byTeam.status).toBe(404);
      expect(byTeam.body).toEqual(NOT_FOUND);
      const byOther = await api(h, 'delete', `/organizations/${acme.organization}`, other.organizationToken);
      expect(byOther.status).toBe(404);
      expect(byOther.body).toEqual(NOT_FOUND);
      expect((await api(h, 'get', `/organizations/${acme.organization}`, h.adminToken)).status).toBe(200);
    });
  });

  describe('GET /organizations/:name/entitlement-set', () => {
    it('limits a free organization to one run task on ten workspaces, without global run tasks', async () => {
      const name = await createOrganization(h, uniqueName('free'), { edition: 'free' });
      const show = await api(h, 'get', `/organizations/${name}`, h.adminToken);
      const res = await api(h, 'get', `/organizations/${name}/entitlement-set`, h.adminToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(res.body.data.type).toBe('entitlement-sets');
      expect(res.body.data.id).toBe(show.body.data.attributes['external-id']);
      expect(res.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': 1,
        'run-task-workspace-limit': 10,
        'global-run-tasks': false,
        teams: true,
      });
    });

    it('leaves a standard organization unlimited, with global run tasks', async () => {
      const res = await api(h, 'get', `/organizations/${acme.organization}/entitlement-set`, acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': null,
        'run-task-workspace-limit': null,
        'global-run-tasks': true,
      });
    });

    it('follows an edition change by the site admin', async () => {
      const name = await createOrganization(h, uniqueName('switch'));
      expect((await api(h, 'patch', `/organizations/${name}`, h.adminToken, organizationDocument({ edition: 'free' }))).status).toBe(200);
      const res = await api(h, 'get', `/organizations/${name}/entitlement-set`, h.adminToken);
      expect(res.body.data.attributes['run-task-limit']).toBe(1);
      expect(res.body.data.attributes['global-run-tasks']).toBe(false);
    });

    it("answers 404 for another organization's entitlement set and a missing organization", async () => {
      const foreign = await api(h, 'get', `/organizations/${other.organization}/entitlement-set`, acme.organizationToken);
      expect(foreign.status).toBe(404);
      expect(foreign.body).toEqual(NOT_FOUND);
      const missing = await api(h, 'get', '/organizations/missing/entitlement-set', h.adminToken);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual(NOT_FOUND);
    });

    it('answers 401 without a token', async () => {
      const res = await api(h, 'get', `/organizations/${acme.organization}/entitlement-set`);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    });
  });
});
