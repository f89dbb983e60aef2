import { describe, expect, it } from '@jest/globals';
import { api, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, UNAUTHORIZED, uniqueName } from '../../../test/support/assertions.ts';
import { workspaceDocument } from './workspaces/documents.ts';
import { useWorkspacesApi } from './workspaces/setup.ts';

describe('workspaces API', () => {
  const g = useWorkspacesApi();

  describe('POST /organizations/:name/workspaces', () => {
    it('lets the owner create a workspace (201) with defaults', async () => {
      const name = uniqueName('created');
      const res = await api(
        g.h,
        'post',
        `/organizations/${g.acme.organization}/workspaces`,
        g.acme.organizationToken,
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
      expect(res.body.data.relationships.organization.data).toEqual({ type: 'organizations', id: g.acme.organization });
      expect(res.body.data.links.self).toBe(`/api/v2/organizations/${g.acme.organization}/workspaces/${name}`);
    });

    it('stores every settable attribute and ignores unknown ones', async () => {
      const name = uniqueName('full');
      const res = await api(
        g.h,
        'post',
        `/organizations/${g.acme.organization}/workspaces`,
        g.acme.organizationToken,
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
      const shown = await api(g.h, 'get', `/workspaces/${res.body.data.id}`, g.acme.organizationToken);
      expect(shown.body.data.attributes).toMatchObject({
        description: 'infra',
        'auto-apply': true,
        'working-directory': 'envs/prod',
        'terraform-version': '1.10.2',
      });
    });

    it('lets the site admin create a workspace', async () => {
      const res = await api(
        g.h,
        'post',
        `/organizations/${g.acme.organization}/workspaces`,
        g.h.adminToken,
        workspaceDocument({ name: uniqueName('by-admin') }),
      );
      expect(res.status).toBe(201);
    });

    it('lets a team with manage-workspaces create a workspace', async () => {
      const name = uniqueName('by-manager');
      const res = await api(g.h, 'post', `/organizations/${g.acme.organization}/workspaces`, g.managerToken, workspaceDocument({ name }));
      expect(res.status).toBe(201);
      expect((await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${name}`, g.acme.organizationToken)).status).toBe(
        200,
      );
    });

    it('answers 404 to a team without manage-workspaces, even one with workspace access', async () => {
      for (const token of [g.readerToken, g.outsiderToken]) {
        const name = uniqueName('refused');
        expectNotFound(await api(g.h, 'post', `/organizations/${g.acme.organization}/workspaces`, token, workspaceDocument({ name })));
        expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${name}`, g.acme.organizationToken));
      }
    });

    it('answers 404 to another organization and for a missing organization', async () => {
      expectNotFound(
        await api(
          g.h,
          'post',
          `/organizations/${g.acme.organization}/workspaces`,
          g.other.organizationToken,
          workspaceDocument({ name: uniqueName('x') }),
        ),
      );
      expectNotFound(
        await api(g.h, 'post', '/organizations/missing/workspaces', g.h.adminToken, workspaceDocument({ name: uniqueName('x') })),
      );
    });

    it('answers 422 "has already been taken" for a duplicate name, which another organization may use', async () => {
      const res = await api(
        g.h,
        'post',
        `/organizations/${g.acme.organization}/workspaces`,
        g.acme.organizationToken,
        workspaceDocument({ name: `${g.acme.organization}-ws` }),
      );
      expectError(res, 422, '/data/attributes/name');
      expect(res.body.errors[0].detail).toContain('has already been taken');
      const elsewhere = await api(
        g.h,
        'post',
        `/organizations/${g.other.organization}/workspaces`,
        g.other.organizationToken,
        workspaceDocument({ name: `${g.acme.organization}-ws` }),
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
        g.h,
        'post',
        `/organizations/${g.acme.organization}/workspaces`,
        g.acme.organizationToken,
        workspaceDocument(attributes),
      );
      expectError(res, 422, pointer);
    });

    it('answers 401 without a token', async () => {
      const res = await api(
        g.h,
        'post',
        `/organizations/${g.acme.organization}/workspaces`,
        undefined,
        workspaceDocument({ name: 'anon' }),
      );
      expect(res.status).toBe(401);
      expect(res.body).toEqual(UNAUTHORIZED);
    });
  });
});
