import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, idsOf, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';

const workspaceDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'workspaces', attributes } });

describe('workspaces API', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  /** A team with "manage workspaces" organization access. */
  let managerToken: string;
  /** A team without organization access, granted read access to acme's seeded workspace only. */
  let readerToken: string;
  /** A team with no access at all. */
  let outsiderToken: string;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, 'acme');
    other = await seedOrganization(h, 'other');
    managerToken = await createTeamToken(
      h,
      acme.organizationToken,
      await createTeam(h, acme.organization, acme.organizationToken, 'managers', { 'manage-workspaces': true }),
    );
    const readers = await createTeam(h, acme.organization, acme.organizationToken, 'readers');
    await grantWorkspace(h, acme.organizationToken, readers, acme.workspaceId, { access: 'read' });
    readerToken = await createTeamToken(h, acme.organizationToken, readers);
    outsiderToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
  });
  afterAll(async () => {
    await h.close();
  });

  describe('POST /organizations/:name/workspaces', () => {
    it('lets the owner create a workspace (201) with defaults', async () => {
      const name = uniqueName('created');
      const res = await api(
        h,
        'post',
        `/organizations/${acme.organization}/workspaces`,
        acme.organizationToken,
        workspaceDocument({ name }),
      );
      expect(res.status).toBe(201);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(res.body.data.type).toBe('workspaces');
      expect(res.body.data.id).toMatch(/^ws-[A-Za-z0-9]{16}$/);
      expect(res.body.data.attributes).toMatchObject({
        name,
        description: null,
        'auto-apply': false,
        'working-directory': '',
        'terraform-version': '1.9.0',
      });
      expect(res.body.data.relationships.organization.data).toEqual({ type: 'organizations', id: acme.organization });
      expect(res.body.data.links.self).toBe(`/api/v2/organizations/${acme.organization}/workspaces/${name}`);
    });

    it('stores every settable attribute and ignores unknown ones', async () => {
      const name = uniqueName('full');
      const res = await api(
        h,
        'post',
        `/organizations/${acme.organization}/workspaces`,
        acme.organizationToken,
        workspaceDocument({
          name,
          description: 'infra',
          'auto-apply': 'true',
          'working-directory': 'envs/prod',
          'terraform-version': '1.10.2',
          'not-an-hcp-attribute': { identifier: 'x/y' },
        }),
      );
      expect(res.status).toBe(201);
      expect(res.body.data.attributes).toMatchObject({
        description: 'infra',
        'auto-apply': true,
        'working-directory': 'envs/prod',
        'terraform-version': '1.10.2',
      });
      expect(res.body.data.attributes).not.toHaveProperty('not-an-hcp-attribute');
      const shown = await api(h, 'get', `/workspaces/${res.body.data.id}`, acme.organizationToken);
      expect(shown.body.data.attributes).toMatchObject({
        description: 'infra',
        'auto-apply': true,
        'working-directory': 'envs/prod',
        'terraform-version': '1.10.2',
      });
    });

    it('lets the site admin create a workspace', async () => {
      const res = await api(
        h,
        'post',
        `/organizations/${acme.organization}/workspaces`,
        h.adminToken,
        workspaceDocument({ name: uniqueName('by-admin') }),
      );
      expect(res.status).toBe(201);
    });

    it('lets a team with manage-workspaces create a workspace', async () => {
      const name = uniqueName('by-manager');
      const res = await api(h, 'post', `/organizations/${acme.organization}/workspaces`, managerToken, workspaceDocument({ name }));
      expect(res.status).toBe(201);
      expect((await api(h, 'get', `/organizations/${acme.organization}/workspaces/${name}`, acme.organizationToken)).status).toBe(200);
    });

    it('answers 404 to a team without manage-workspaces, even one with workspace access', async () => {
      for (const token of [readerToken, outsiderToken]) {
        const name = uniqueName('refused');
        expectNotFound(await api(h, 'post', `/organizations/${acme.organization}/workspaces`, token, workspaceDocument({ name })));
        expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/workspaces/${name}`, acme.organizationToken));
      }
    });

    it('answers 404 to another organization and for a missing organization', async () => {
      expectNotFound(
        await api(
          h,
          'post',
          `/organizations/${acme.organization}/workspaces`,
          other.organizationToken,
          workspaceDocument({ name: uniqueName('x') }),
        ),
      );
      expectNotFound(await api(h, 'post', '/organizations/missing/workspaces', h.adminToken, workspaceDocument({ name: uniqueName('x') })));
    });

    it('answers 422 "has already been taken" for a duplicate name, which another organization may use', async () => {
      const res = await api(
        h,
        'post',
        `/organizations/${acme.organization}/workspaces`,
        acme.organizationToken,
        workspaceDocument({ name: `${acme.organization}-ws` }),
      );
      expectError(res, 422, '/data/attributes/name');
      expect(res.body.errors[0].detail).toContain('has already been taken');
      const elsewhere = await api(
        h,
        'post',
        `/organizations/${other.organization}/workspaces`,
        other.organizationToken,
        workspaceDocument({ name: `${acme.organization}-ws` }),
      );
      expect(elsewhere.status).toBe(201);
    });

    it.each([
      ['a missing name', {}, '/data/attributes/name'],
      ['a name with a slash', { name: 'a/b' }, '/data/attributes/name'],
      ['a name longer than 90 characters', { name: 'w'.repeat(91) }, '/data/attributes/name'],
      ['a numeric name', { name: 5 }, '/data/attributes/name'],
      ['a non-boolean auto-apply', { name: 'ok-name', 'auto-apply': 'often' }, '/data/attributes/auto-apply'],
      [
        'a terraform-version that is not a version',
        { name: 'ok-name', 'terraform-version': 'latest' },
        '/data/attributes/terraform-version',
      ],
      ['a numeric description', { name: 'ok-name', description: 3 }, '/data/attributes/description'],
    ])('answers 422 with a pointer for %s', async (_label, attributes, pointer) => {
      const res = await api(
        h,
        'post',
        `/organizations/${acme.organization}/workspaces`,
        acme.organizationToken,
        workspaceDocument(attributes),
      );
      expectError(res, 422, pointer);
    });

    it('answers 401 without a token', async () => {
      const res = await api(h, 'post', `/organizations/${acme.organization}/workspaces`, undefined, workspaceDocument({ name: 'anon' }));
      expect(res.status).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    });
  });

  describe('GET a workspace', () => {
    it('shows a workspace by id and by organization and name', async () => {
      const byId = await api(h, 'get', `/workspaces/${acme.workspaceId}`, acme.organizationToken);
      expect(byId.status).toBe(200);
      expect(byId.headers['content-type']).toContain(JSON_API);
      expect(byId.body.data.id).toBe(acme.workspaceId);
      expect(byId.body.data.attributes.name).toBe(`${acme.organization}-ws`);
      const byName = await api(h, 'get', `/organizations/${acme.organization}/workspaces/${acme.organization}-ws`, acme.organizationToken);
      expect(byName.status).toBe(200);
      expect(byName.body).toEqual(byId.body);
    });

    it('shows a workspace to the admin, a managing team and a team with access', async () => {
      for (const token of [h.adminToken, managerToken, readerToken]) {
        expect((await api(h, 'get', `/workspaces/${acme.workspaceId}`, token)).status).toBe(200);
        expect((await api(h, 'get', `/organizations/${acme.organization}/workspaces/${acme.organization}-ws`, token)).status).toBe(200);
      }
    });

    it('answers 404 to a team without access', async () => {
      expectNotFound(await api(h, 'get', `/workspaces/${acme.workspaceId}`, outsiderToken));
      expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/workspaces/${acme.organization}-ws`, outsiderToken));
    });

    it("answers 404 for another organization's workspace, identical to a missing one", async () => {
      expectNotFound(await api(h, 'get', `/workspaces/${other.workspaceId}`, acme.organizationToken));
      expectNotFound(
        await api(h, 'get', `/organizations/${other.organization}/workspaces/${other.organization}-ws`, acme.organizationToken),
      );
      expectNotFound(await api(h, 'get', '/workspaces/ws-missing0000000000', acme.organizationToken));
      expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/workspaces/missing`, acme.organizationToken));
    });

    it('does not find a workspace under the wrong organization name', async () => {
      // Both organizations can be seen by the admin, but the name belongs to acme only.
      const name = uniqueName('only-in-acme');
      await createWorkspace(h, acme.organization, acme.organizationToken, name);
      expect((await api(h, 'get', `/organizations/${acme.organization}/workspaces/${name}`, h.adminToken)).status).toBe(200);
      expectNotFound(await api(h, 'get', `/organizations/${other.organization}/workspaces/${name}`, h.adminToken));
      expectNotFound(await api(h, 'get', `/organizations/${other.organization}/workspaces/${name}`, acme.organizationToken));
    });
  });

  describe('GET /organizations/:name/workspaces', () => {
    let listed: Fixture;
    let names: string[];
    let teamWithOne: string;
    let granted: string;
    beforeAll(async () => {
      listed = await seedOrganization(h, 'listed');
      for (const name of ['zeta', 'alpha', 'mid']) await createWorkspace(h, listed.organization, listed.organizationToken, name);
      names = ['alpha', `${listed.organization}-ws`, 'mid', 'zeta'];
      const team = await createTeam(h, listed.organization, listed.organizationToken, 'one-workspace');
      const zeta = await api(h, 'get', `/organizations/${listed.organization}/workspaces/zeta`, listed.organizationToken);
      granted = zeta.body.data.id;
      await grantWorkspace(h, listed.organizationToken, team, granted, { access: 'plan' });
      teamWithOne = await createTeamToken(h, listed.organizationToken, team);
    });

    it('lists every workspace to the owner, sorted by name, with pagination meta', async () => {
      const res = await api(h, 'get', `/organizations/${listed.organization}/workspaces`, listed.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.data.map((ws: { attributes: { name: string } }) => ws.attributes.name)).toEqual(names);
      expect(res.body.meta.pagination).toMatchObject({ 'current-page': 1, 'total-count': 4, 'total-pages': 1, 'next-page': null });
    });

    it('paginates', async () => {
      const res = await api(
        h,
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
      const res = await api(h, 'get', `/organizations/${listed.organization}/workspaces`, teamWithOne);
      expect(res.status).toBe(200);
      expect(idsOf(res)).toEqual([granted]);
      expect(res.body.meta.pagination['total-count']).toBe(1);
    });

    it('shows a team without any access an empty list, and a managing team everything', async () => {
      const empty = await api(h, 'get', `/organizations/${acme.organization}/workspaces`, outsiderToken);
      expect(empty.status).toBe(200);
      expect(empty.body.data).toEqual([]);
      const all = await api(h, 'get', `/organizations/${acme.organization}/workspaces?page[size]=100`, managerToken);
      const owner = await api(h, 'get', `/organizations/${acme.organization}/workspaces?page[size]=100`, acme.organizationToken);
      expect(all.status).toBe(200);
      expect(idsOf(all)).toEqual(idsOf(owner));
      expect(idsOf(all)).toContain(acme.workspaceId);
    });

    it("answers 404 for another organization's list", async () => {
      expectNotFound(await api(h, 'get', `/organizations/${listed.organization}/workspaces`, acme.organizationToken));
      expectNotFound(await api(h, 'get', `/organizations/${listed.organization}/workspaces`, managerToken));
    });
  });

  describe('PATCH a workspace', () => {
    it('updates attributes by id', async () => {
      const id = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('patch'));
      const res = await api(
        h,
        'patch',
        `/workspaces/${id}`,
        acme.organizationToken,
        workspaceDocument({ description: 'changed', 'auto-apply': true, 'terraform-version': '1.11.0', 'working-directory': 'sub' }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.attributes).toMatchObject({
        description: 'changed',
        'auto-apply': true,
        'terraform-version': '1.11.0',
        'working-directory': 'sub',
      });
      const shown = await api(h, 'get', `/workspaces/${id}`, acme.organizationToken);
      expect(shown.body.data.attributes).toMatchObject({ description: 'changed', 'auto-apply': true, 'terraform-version': '1.11.0' });

      const cleared = await api(h, 'patch', `/workspaces/${id}`, acme.organizationToken, workspaceDocument({ description: null }));
      expect(cleared.status).toBe(200);
      expect(cleared.body.data.attributes.description).toBeNull();
      expect(cleared.body.data.attributes['auto-apply']).toBe(true);
    });

    it('renames by organization and name; the old name is then 404', async () => {
      const oldName = uniqueName('old');
      const newName = uniqueName('new');
      const id = await createWorkspace(h, acme.organization, acme.organizationToken, oldName);
      const res = await api(
        h,
        'patch',
        `/organizations/${acme.organization}/workspaces/${oldName}`,
        managerToken,
        workspaceDocument({ name: newName }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(id);
      expect(res.body.data.attributes.name).toBe(newName);
      expect(res.body.data.links.self).toBe(`/api/v2/organizations/${acme.organization}/workspaces/${newName}`);
      expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/workspaces/${oldName}`, acme.organizationToken));
      expect((await api(h, 'get', `/organizations/${acme.organization}/workspaces/${newName}`, acme.organizationToken)).body.data.id).toBe(
        id,
      );
    });

    it('answers 422 "has already been taken" for a rename to a taken name', async () => {
      const id = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('clash'));
      const res = await api(
        h,
        'patch',
        `/workspaces/${id}`,
        acme.organizationToken,
        workspaceDocument({ name: `${acme.organization}-ws` }),
      );
      expectError(res, 422, '/data/attributes/name');
      expect(res.body.errors[0].detail).toContain('has already been taken');
    });

    it('answers 422 with a pointer for invalid values', async () => {
      expectError(
        await api(h, 'patch', `/workspaces/${acme.workspaceId}`, acme.organizationToken, workspaceDocument({ 'terraform-version': 1 })),
        422,
        '/data/attributes/terraform-version',
      );
      expectError(
        await api(h, 'patch', `/workspaces/${acme.workspaceId}`, acme.organizationToken, workspaceDocument({ name: 'has space' })),
        422,
        '/data/attributes/name',
      );
      expectError(
        await api(h, 'patch', `/workspaces/${acme.workspaceId}`, acme.organizationToken, workspaceDocument({ 'auto-apply': null })),
        422,
        '/data/attributes/auto-apply',
      );
    });

    it('answers 404 to a team with only workspace access, to another organization and for a missing workspace', async () => {
      expectNotFound(await api(h, 'patch', `/workspaces/${acme.workspaceId}`, readerToken, workspaceDocument({ description: 'reader' })));
      expectNotFound(
        await api(
          h,
          'patch',
          `/organizations/${acme.organization}/workspaces/${acme.organization}-ws`,
          readerToken,
          workspaceDocument({ description: 'reader' }),
        ),
      );
      expectNotFound(
        await api(h, 'patch', `/workspaces/${acme.workspaceId}`, other.organizationToken, workspaceDocument({ description: 'other' })),
      );
      expectNotFound(await api(h, 'patch', '/workspaces/ws-missing0000000000', h.adminToken, workspaceDocument({ description: 'x' })));
      const shown = await api(h, 'get', `/workspaces/${acme.workspaceId}`, acme.organizationToken);
      expect(shown.body.data.attributes.description).toBeNull();
    });
  });

  describe('DELETE a workspace', () => {
    it('deletes by id: 204, then 404, with its runs', async () => {
      const id = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('del-id'));
      const runId = await createRun(h, acme.organizationToken, id);
      const res = await api(h, 'delete', `/workspaces/${id}`, acme.organizationToken);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expectNotFound(await api(h, 'get', `/workspaces/${id}`, acme.organizationToken));
      expectNotFound(await api(h, 'delete', `/workspaces/${id}`, acme.organizationToken));
      expectNotFound(await api(h, 'get', `/runs/${runId}`, acme.organizationToken));
    });

    it('deletes by organization and name: 204, then 404', async () => {
      const name = uniqueName('del-name');
      const id = await createWorkspace(h, acme.organization, acme.organizationToken, name);
      const res = await api(h, 'delete', `/organizations/${acme.organization}/workspaces/${name}`, managerToken);
      expect(res.status).toBe(204);
      expectNotFound(await api(h, 'get', `/organizations/${acme.organization}/workspaces/${name}`, acme.organizationToken));
      expectNotFound(await api(h, 'get', `/workspaces/${id}`, acme.organizationToken));
      expectNotFound(await api(h, 'delete', `/organizations/${acme.organization}/workspaces/${name}`, acme.organizationToken));
    });

    it('answers 404 to a team without manage-workspaces and to another organization, deleting nothing', async () => {
      expectNotFound(await api(h, 'delete', `/workspaces/${acme.workspaceId}`, readerToken));
      expectNotFound(await api(h, 'delete', `/organizations/${acme.organization}/workspaces/${acme.organization}-ws`, readerToken));
      expectNotFound(await api(h, 'delete', `/workspaces/${acme.workspaceId}`, outsiderToken));
      expectNotFound(await api(h, 'delete', `/workspaces/${acme.workspaceId}`, other.organizationToken));
      expectNotFound(
        await api(h, 'delete', `/organizations/${acme.organization}/workspaces/${acme.organization}-ws`, other.organizationToken),
      );
      expect((await api(h, 'get', `/workspaces/${acme.workspaceId}`, acme.organizationToken)).status).toBe(200);
    });
  });
});
