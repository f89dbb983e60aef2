import { describe, expect, it } from '@jest/globals';
import { api, createOrganization, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, NOT_FOUND, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';
import { organizationDocument } from './organizations/documents.ts';
import { useOrganizationsApi } from './organizations/setup.ts';

describe('organizations API', () => {
  const g = useOrganizationsApi();

  describe('GET /organizations', () => {
    it('shows the site admin every organization, with pagination meta', async () => {
      const res = await api(g.h, 'get', '/organizations?page[size]=100', g.h.adminToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toContain(JSON_API);
      const names = res.body.data.map((org: { id: string }) => org.id);
      expect(names).toEqual(expect.arrayContaining([g.acme.organization, g.other.organization]));
      expect(res.body.meta.pagination['total-count']).toBe(names.length);
      expect(res.body.meta.pagination['current-page']).toBe(1);
    });

    it('paginates: page[size]=1 gives one organization per page with links', async () => {
      const all = await api(g.h, 'get', '/organizations?page[size]=100', g.h.adminToken);
      const total = all.body.meta.pagination['total-count'] as number;
      expect(total).toBeGreaterThanOrEqual(2);
      const second = await api(g.h, 'get', '/organizations?page[size]=1&page[number]=2', g.h.adminToken);
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
        const res = await api(g.h, 'get', `/organizations?${query}`, g.h.adminToken);
        expectError(res, 422);
        expect(res.body.errors[0].source.parameter).toMatch(/^page\[(size|number)\]$/);
      }
    });

    it('shows an organization token only its own organization', async () => {
      const res = await api(g.h, 'get', '/organizations', g.acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((org: { id: string }) => org.id)).toEqual([g.acme.organization]);
      expect(res.body.meta.pagination['total-count']).toBe(1);
    });

    it('shows a team token only its own organization', async () => {
      const res = await api(g.h, 'get', '/organizations', g.acmeTeamToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((org: { id: string }) => org.id)).toEqual([g.acme.organization]);
    });
  });

  describe('GET /organizations/:name', () => {
    it('shows the organization to the admin, its owner and its teams', async () => {
      for (const token of [g.h.adminToken, g.acme.organizationToken, g.acmeTeamToken]) {
        const res = await api(g.h, 'get', `/organizations/${g.acme.organization}`, token);
        expect(res.status).toBe(200);
        expect(res.body.data.id).toBe(g.acme.organization);
        expect(res.body.data.attributes.email).toBe(`${g.acme.organization}@example.test`);
      }
    });

    it("answers 404 for another organization's name, identical to a missing one", async () => {
      const foreign = await api(g.h, 'get', `/organizations/${g.other.organization}`, g.acme.organizationToken);
      const missing = await api(g.h, 'get', '/organizations/nope', g.acme.organizationToken);
      expect(foreign.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(foreign.body).toEqual(NOT_FOUND);
      expect(missing.body).toEqual(foreign.body);
    });

    it('looks organizations up by name, not by external id', async () => {
      const show = await api(g.h, 'get', `/organizations/${g.acme.organization}`, g.h.adminToken);
      const byExternalId = await api(g.h, 'get', `/organizations/${show.body.data.attributes['external-id']}`, g.h.adminToken);
      expect(byExternalId.status).toBe(404);
    });
  });

  describe('GET /organizations/:name/entitlement-set', () => {
    it('limits a free organization to one run task on ten workspaces, without global run tasks', async () => {
      const name = await createOrganization(g.h, uniqueName('free'), { edition: 'free' });
      const show = await api(g.h, 'get', `/organizations/${name}`, g.h.adminToken);
      const res = await api(g.h, 'get', `/organizations/${name}/entitlement-set`, g.h.adminToken);
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
      const res = await api(g.h, 'get', `/organizations/${g.acme.organization}/entitlement-set`, g.acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': null,
        'run-task-workspace-limit': null,
        'global-run-tasks': true,
      });
    });

    it('follows an edition change by the site admin', async () => {
      const name = await createOrganization(g.h, uniqueName('switch'));
      expect((await api(g.h, 'patch', `/organizations/${name}`, g.h.adminToken, organizationDocument({ edition: 'free' }))).status).toBe(
        200,
      );
      const res = await api(g.h, 'get', `/organizations/${name}/entitlement-set`, g.h.adminToken);
      expect(res.body.data.attributes['run-task-limit']).toBe(1);
      expect(res.body.data.attributes['global-run-tasks']).toBe(false);
    });

    it("answers 404 for another organization's entitlement set and a missing organization", async () => {
      const foreign = await api(g.h, 'get', `/organizations/${g.other.organization}/entitlement-set`, g.acme.organizationToken);
      expect(foreign.status).toBe(404);
      expect(foreign.body).toEqual(NOT_FOUND);
      const missing = await api(g.h, 'get', '/organizations/missing/entitlement-set', g.h.adminToken);
      expect(missing.status).toBe(404);
      expect(missing.body).toEqual(NOT_FOUND);
    });

    it('answers 401 without a token', async () => {
      const res = await api(g.h, 'get', `/organizations/${g.acme.organization}/entitlement-set`);
      expect(res.status).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    });
  });
});
