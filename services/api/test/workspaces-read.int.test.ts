import { beforeAll, describe, expect, it } from '@jest/globals';
import {
  api,
  createTeam,
  createTeamToken,
  createWorkspace,
  type Fixture,
  grantWorkspace,
  JSON_API,
  seedOrganization,
} from '../../../test/support/fixtures.ts';
import { expectNotFound, idsOf, uniqueName } from '../../../test/support/assertions.ts';
import { useWorkspacesApi } from './workspaces/setup.ts';

describe('workspaces API', () => {
  const g = useWorkspacesApi();

  describe('GET a workspace', () => {
    it('shows a workspace by id and by organization and name', async () => {
      const byId = await api(g.h, 'get', `/workspaces/${g.acme.workspaceId}`, g.acme.organizationToken);
      expect(byId.status).toBe(200);
      expect(byId.headers['content-type']).toContain(JSON_API);
      expect(byId.body.data.id).toBe(g.acme.workspaceId);
      expect(byId.body.data.attributes.name).toBe(`${g.acme.organization}-ws`);
      const byName = await api(
        g.h,
        'get',
        `/organizations/${g.acme.organization}/workspaces/${g.acme.organization}-ws`,
        g.acme.organizationToken,
      );
      expect(byName.status).toBe(200);
      expect(byName.body).toEqual(byId.body);
    });

    it('shows a workspace to the admin, a managing team and a team with access', async () => {
      for (const token of [g.h.adminToken, g.managerToken, g.readerToken]) {
        expect((await api(g.h, 'get', `/workspaces/${g.acme.workspaceId}`, token)).status).toBe(200);
        expect((await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${g.acme.organization}-ws`, token)).status).toBe(
          200,
        );
      }
    });

    it('answers 404 to a team without access', async () => {
      expectNotFound(await api(g.h, 'get', `/workspaces/${g.acme.workspaceId}`, g.outsiderToken));
      expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${g.acme.organization}-ws`, g.outsiderToken));
    });

    it("answers 404 for another organization's workspace, identical to a missing one", async () => {
      expectNotFound(await api(g.h, 'get', `/workspaces/${g.other.workspaceId}`, g.acme.organizationToken));
      expectNotFound(
        await api(g.h, 'get', `/organizations/${g.other.organization}/workspaces/${g.other.organization}-ws`, g.acme.organizationToken),
      );
      expectNotFound(await api(g.h, 'get', '/workspaces/ws-missing0000000000', g.acme.organizationToken));
      expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/missing`, g.acme.organizationToken));
    });

    it('does not find a workspace under the wrong organization name', async () => {
      // Both organizations can be seen by the admin, but the name belongs to acme only.
      const name = uniqueName('only-in-acme');
      await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, name);
      expect((await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${name}`, g.h.adminToken)).status).toBe(200);
      expectNotFound(await api(g.h, 'get', `/organizations/${g.other.organization}/workspaces/${name}`, g.h.adminToken));
      expectNotFound(await api(g.h, 'get', `/organizations/${g.other.organization}/workspaces/${name}`, g.acme.organizationToken));
    });
  });

  describe('GET /organizations/:name/workspaces', () => {
    let listed: Fixture;
    let names: string[];
    let teamWithOne: string;
    let granted: string;
    beforeAll(async () => {
      listed = await seedOrganization(g.h, 'listed');
      for (const name of ['zeta', 'alpha', 'mid']) await createWorkspace(g.h, listed.organization, listed.organizationToken, name);
      names = ['alpha', `${listed.organization}-ws`, 'mid', 'zeta'];
      const team = await createTeam(g.h, listed.organization, listed.organizationToken, 'one-workspace');
      const zeta = await api(g.h, 'get', `/organizations/${listed.organization}/workspaces/zeta`, listed.organizationToken);
      granted = zeta.body.data.id;
      await grantWorkspace(g.h, listed.organizationToken, team, granted, { access: 'plan' });
      teamWithOne = await createTeamToken(g.h, listed.organizationToken, team);
    });

    it('lists every workspace to the owner, sorted by name, with pagination meta', async () => {
      const res = await api(g.h, 'get', `/organizations/${listed.organization}/workspaces`, listed.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((ws: { attributes: { name: string } }) => ws.attributes.name)).toEqual(names);
      expect(res.body.meta.pagination).toMatchObject({ 'current-page': 1, 'total-count': 4, 'total-pages': 1, 'next-page': null });
    });

    it('paginates', async () => {
      const res = await api(
        g.h,
        'get',
        `/organizations/${listed.organization}/workspaces?page[size]=3&page[number]=2`,
        listed.organizationToken,
      );
      expect(res.status).toBe(200);
      expect(res.body.data.map((ws: { attributes: { name: string } }) => ws.attributes.name)).toEqual(['zeta']);
      expect(res.body.meta.pagination).toEqual({
        'current-page': 2,
        'page-size': 3,
        'prev-page': 1,
        'next-page': null,
        'total-pages': 2,
        'total-count': 4,
      });
      expect(res.body.links.prev).toBe(
        `http://runtasks.test/api/v2/organizations/${listed.organization}/workspaces?page%5Bsize%5D=3&page%5Bnumber%5D=1`,
      );
    });

    it('shows a team only the workspaces it has access to', async () => {
      const res = await api(g.h, 'get', `/organizations/${listed.organization}/workspaces`, teamWithOne);
      expect(res.status).toBe(200);
      expect(idsOf(res)).toEqual([granted]);
      expect(res.body.meta.pagination['total-count']).toBe(1);
    });

    it('shows a team without any access an empty list, and a managing team everything', async () => {
      const empty = await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces`, g.outsiderToken);
      expect(empty.status).toBe(200);
      expect(empty.body.data).toEqual([]);
      const all = await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces?page[size]=100`, g.managerToken);
      const owner = await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces?page[size]=100`, g.acme.organizationToken);
      expect(all.status).toBe(200);
      expect(idsOf(all)).toEqual(idsOf(owner));
      expect(idsOf(all)).toContain(g.acme.workspaceId);
    });

    it("answers 404 for another organization's list", async () => {
      expectNotFound(await api(g.h, 'get', `/organizations/${listed.organization}/workspaces`, g.acme.organizationToken));
      expectNotFound(await api(g.h, 'get', `/organizations/${listed.organization}/workspaces`, g.managerToken));
    });
  });
});
