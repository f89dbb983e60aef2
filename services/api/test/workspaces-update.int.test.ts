import { describe, expect, it } from '@jest/globals';
import { api, createRun, createWorkspace } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { workspaceDocument } from './workspaces/documents.ts';
import { useWorkspacesApi } from './workspaces/setup.ts';

describe('workspaces API', () => {
  const g = useWorkspacesApi();

  describe('PATCH a workspace', () => {
    it('updates attributes by id', async () => {
      const id = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('patch'));
      const res = await api(
        g.h,
        'patch',
        `/workspaces/${id}`,
        g.acme.organizationToken,
        workspaceDocument({ description: 'changed', 'auto-apply': true, 'terraform-version': '1.11.0', 'working-directory': 'sub' }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.attributes).toMatchObject({
        description: 'changed',
        'auto-apply': true,
        'terraform-version': '1.11.0',
        'working-directory': 'sub',
      });
      const shown = await api(g.h, 'get', `/workspaces/${id}`, g.acme.organizationToken);
      expect(shown.body.data.attributes).toMatchObject({ description: 'changed', 'auto-apply': true, 'terraform-version': '1.11.0' });

      const cleared = await api(g.h, 'patch', `/workspaces/${id}`, g.acme.organizationToken, workspaceDocument({ description: null }));
      expect(cleared.status).toBe(200);
      expect(cleared.body.data.attributes.description).toBeNull();
      expect(cleared.body.data.attributes['auto-apply']).toBe(true);
    });

    it('renames by organization and name; the old name is then 404', async () => {
      const oldName = uniqueName('old');
      const newName = uniqueName('new');
      const id = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, oldName);
      const res = await api(
        g.h,
        'patch',
        `/organizations/${g.acme.organization}/workspaces/${oldName}`,
        g.managerToken,
        workspaceDocument({ name: newName }),
      );
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(id);
      expect(res.body.data.attributes.name).toBe(newName);
      expect(res.body.data.links.self).toBe(`/api/v2/organizations/${g.acme.organization}/workspaces/${newName}`);
      expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${oldName}`, g.acme.organizationToken));
      expect(
        (await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${newName}`, g.acme.organizationToken)).body.data.id,
      ).toBe(id);
    });

    it('answers 422 "has already been taken" for a rename to a taken name', async () => {
      const id = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('clash'));
      const res = await api(
        g.h,
        'patch',
        `/workspaces/${id}`,
        g.acme.organizationToken,
        workspaceDocument({ name: `${g.acme.organization}-ws` }),
      );
      expectError(res, 422, '/data/attributes/name');
      expect(res.body.errors[0].detail).toContain('has already been taken');
    });

    it('answers 422 with a pointer for invalid values', async () => {
      expectError(
        await api(
          g.h,
          'patch',
          `/workspaces/${g.acme.workspaceId}`,
          g.acme.organizationToken,
          workspaceDocument({ 'terraform-version': 1 }),
        ),
        422,
        '/data/attributes/terraform-version',
      );
      expectError(
        await api(g.h, 'patch', `/workspaces/${g.acme.workspaceId}`, g.acme.organizationToken, workspaceDocument({ name: 'has space' })),
        422,
        '/data/attributes/name',
      );
      expectError(
        await api(g.h, 'patch', `/workspaces/${g.acme.workspaceId}`, g.acme.organizationToken, workspaceDocument({ 'auto-apply': null })),
        422,
        '/data/attributes/auto-apply',
      );
    });

    it('answers 404 to a team with only workspace access, to another organization and for a missing workspace', async () => {
      expectNotFound(
        await api(g.h, 'patch', `/workspaces/${g.acme.workspaceId}`, g.readerToken, workspaceDocument({ description: 'reader' })),
      );
      expectNotFound(
        await api(
          g.h,
          'patch',
          `/organizations/${g.acme.organization}/workspaces/${g.acme.organization}-ws`,
          g.readerToken,
          workspaceDocument({ description: 'reader' }),
        ),
      );
      expectNotFound(
        await api(
          g.h,
          'patch',
          `/workspaces/${g.acme.workspaceId}`,
          g.other.organizationToken,
          workspaceDocument({ description: 'other' }),
        ),
      );
      expectNotFound(await api(g.h, 'patch', '/workspaces/ws-missing0000000000', g.h.adminToken, workspaceDocument({ description: 'x' })));
      const shown = await api(g.h, 'get', `/workspaces/${g.acme.workspaceId}`, g.acme.organizationToken);
      expect(shown.body.data.attributes.description).toBeNull();
    });
  });

  describe('DELETE a workspace', () => {
    it('deletes by id: 204, then 404, with its runs', async () => {
      const id = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, uniqueName('del-id'));
      const runId = await createRun(g.h, g.acme.organizationToken, id);
      const res = await api(g.h, 'delete', `/workspaces/${id}`, g.acme.organizationToken);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expectNotFound(await api(g.h, 'get', `/workspaces/${id}`, g.acme.organizationToken));
      expectNotFound(await api(g.h, 'delete', `/workspaces/${id}`, g.acme.organizationToken));
      expectNotFound(await api(g.h, 'get', `/runs/${runId}`, g.acme.organizationToken));
    });

    it('deletes by organization and name: 204, then 404', async () => {
      const name = uniqueName('del-name');
      const id = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, name);
      const res = await api(g.h, 'delete', `/organizations/${g.acme.organization}/workspaces/${name}`, g.managerToken);
      expect(res.status).toBe(204);
      expectNotFound(await api(g.h, 'get', `/organizations/${g.acme.organization}/workspaces/${name}`, g.acme.organizationToken));
      expectNotFound(await api(g.h, 'get', `/workspaces/${id}`, g.acme.organizationToken));
      expectNotFound(await api(g.h, 'delete', `/organizations/${g.acme.organization}/workspaces/${name}`, g.acme.organizationToken));
    });

    it('answers 404 to a team without manage-workspaces and to another organization, deleting nothing', async () => {
      expectNotFound(await api(g.h, 'delete', `/workspaces/${g.acme.workspaceId}`, g.readerToken));
      expectNotFound(await api(g.h, 'delete', `/organizations/${g.acme.organization}/workspaces/${g.acme.organization}-ws`, g.readerToken));
      expectNotFound(await api(g.h, 'delete', `/workspaces/${g.acme.workspaceId}`, g.outsiderToken));
      expectNotFound(await api(g.h, 'delete', `/workspaces/${g.acme.workspaceId}`, g.other.organizationToken));
      expectNotFound(
        await api(g.h, 'delete', `/organizations/${g.acme.organization}/workspaces/${g.acme.organization}-ws`, g.other.organizationToken),
      );
      expect((await api(g.h, 'get', `/workspaces/${g.acme.workspaceId}`, g.acme.organizationToken)).status).toBe(200);
    });
  });
});
