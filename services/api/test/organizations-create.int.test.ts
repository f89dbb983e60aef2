import { describe, expect, it } from '@jest/globals';
import { ApiToken } from '@runtasks/shared/db';
import { API_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { api, createOrganization, createOrganizationToken, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, NOT_FOUND, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';
import { organizationDocument } from './organizations/documents.ts';
import { useOrganizationsApi } from './organizations/setup.ts';

describe('organizations API', () => {
  const g = useOrganizationsApi();

  describe('authentication', () => {
    it('answers 401 with one identical body for missing, malformed, unknown and revoked tokens', async () => {
      const name = await createOrganization(g.h, uniqueName('revoked'));
      const revoked = await createOrganizationToken(g.h, name);
      const show = await api(g.h, 'get', `/organizations/${name}`, revoked);
      expect(show.status).toBe(200);
      const revokedCount = await g.h.orm.em
        .fork()
        .nativeUpdate(
          ApiToken,
          { kind: 'organization', revokedAt: null, organization: show.body.data.attributes['external-id'] },
          { revokedAt: new Date() },
        );
      expect(revokedCount).toBe(1);

      const responses = [
        await api(g.h, 'get', '/organizations'),
        await api(g.h, 'get', '/organizations', 'not-a-token'),
        await api(g.h, 'get', '/organizations', `${API_TOKEN_PREFIX}short`),
        await api(g.h, 'get', '/organizations', generateToken(API_TOKEN_PREFIX)),
        await api(g.h, 'get', '/organizations', revoked),
        await g.h.http.get('/api/v2/organizations').set('Authorization', `Basic ${g.acme.organizationToken}`),
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
      const res = await api(g.h, 'post', '/organizations', g.h.adminToken, organizationDocument({ name, email: 'owner@example.test' }));
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

      const show = await api(g.h, 'get', `/organizations/${name}`, g.h.adminToken);
      expect(show.status).toBe(200);
      expect(show.body.data.attributes['external-id']).toBe(res.body.data.attributes['external-id']);
    });

    it('accepts the edition and task-overrides-enabled (also as strings) and ignores unknown attributes', async () => {
      const name = uniqueName('options');
      const res = await api(
        g.h,
        'post',
        '/organizations',
        g.h.adminToken,
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
      const missing = await api(g.h, 'get', '/organizations/does-not-exist', g.h.adminToken);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual(NOT_FOUND);
      for (const token of [g.acme.organizationToken, g.acmeTeamToken]) {
        const name = uniqueName('forbidden');
        const res = await api(g.h, 'post', '/organizations', token, organizationDocument({ name, email: 'x@example.test' }));
        expect(res.status).toBe(404);
        expect(res.body).toEqual(missing.body);
        expect((await api(g.h, 'get', `/organizations/${name}`, g.h.adminToken)).status).toBe(404);
      }
    });

    it('answers 422 "has already been taken" for a duplicate name', async () => {
      const res = await api(
        g.h,
        'post',
        '/organizations',
        g.h.adminToken,
        organizationDocument({ name: g.acme.organization, email: 'dup@example.test' }),
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
      const res = await api(g.h, 'post', '/organizations', g.h.adminToken, organizationDocument(attributes));
      expectError(res, 422, pointer);
      if (typeof attributes['name'] === 'string' && /^[A-Za-z0-9_-]{1,40}$/.test(attributes['name'])) {
        expect((await api(g.h, 'get', `/organizations/${attributes['name']}`, g.h.adminToken)).status).toBe(404);
      }
    });

    it('answers 422 for a document of the wrong type and 400 for malformed JSON', async () => {
      const wrongType = await api(g.h, 'post', '/organizations', g.h.adminToken, {
        data: { type: 'workspaces', attributes: { name: uniqueName('t'), email: 'a@example.test' } },
      });
      expectError(wrongType, 422, '/data/type');
      const malformed = await g.h.http
        .post('/api/v2/organizations')
        .set('Authorization', `Bearer ${g.h.adminToken}`)
        .set('Content-Type', JSON_API)
        .send('{"data":');
      expectError(malformed, 400);
    });

    it('answers 415 for a body that is not JSON', async () => {
      const res = await g.h.http
        .post('/api/v2/organizations')
        .set('Authorization', `Bearer ${g.h.adminToken}`)
        .set('Content-Type', 'text/plain')
        .send('name=x');
      expectError(res, 415);
    });
  });
});
