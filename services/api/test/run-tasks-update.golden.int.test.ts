import { describe, expect, it } from '@jest/globals';
import { RunTask } from '@runtasks/shared/db';
import { createHmac } from 'node:crypto';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, createOrganization, createOrganizationToken, type Fixture, seedOrganization } from '../../../test/support/fixtures.ts';
import { expectPagination, expectStatus, expectTask, expectTaskResult } from './run-tasks-golden/documents.ts';
import { useRunTasksGolden } from './run-tasks-golden/setup.ts';

/**
 * Golden tests: every run task endpoint, request and response, checked field by field against
 * what go-tfe, the provider and the Terraform CLI decode (docs/api.md, "Compatibility").
 * Documents are compared whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails.
 */
describe('run tasks API golden documents', () => {
  const g = useRunTasksGolden();
  const { createTask, newTask, runWithTask } = g;

  describe('organization tasks', () => {
    it('update → 200; omitted attributes keep their values; data.id is accepted; no verification unless URL or key change', async () => {
      const name = uniqueName('task');
      const created = await createTask(g.std, {
        name,
        description: 'before',
        enabled: false,
        'hmac-key': 'kept-key',
        'global-configuration': { enabled: true, stages: ['pre_apply'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(created, 201);
      const id = created.body.data.id as string;
      const before = g.taskServer.requests.length;
      const res = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', id, attributes: { description: 'after' } },
      });
      expectStatus(res, 200);
      expectTask(res.body.data, {
        organization: g.std.organization,
        name,
        url: g.taskServer.url,
        description: 'after',
        enabled: false,
        global: { enabled: true, stages: ['pre_apply'], 'enforcement-level': 'mandatory' },
      });
      expect(res.body.data.attributes['created-at']).toBe(created.body.data.attributes['created-at']);
      expect(Date.parse(res.body.data.attributes['updated-at'])).toBeGreaterThanOrEqual(
        Date.parse(created.body.data.attributes['updated-at']),
      );
      expect(g.taskServer.requests.length).toBe(before);

      // A new URL is verified with the key kept from before (the key was omitted, so it is unchanged).
      const newUrl = `${g.taskServer.url}/moved`;
      const moved = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', attributes: { url: newUrl } },
      });
      expectStatus(moved, 200);
      expect(moved.body.data.attributes).toMatchObject({ name, url: newUrl, description: 'after', enabled: false, 'hmac-key': null });
      expect(g.taskServer.requests.length).toBe(before + 1);
      const verification = g.taskServer.requests[before];
      expect(verification?.headers['x-tfc-task-signature']).toBe(
        createHmac('sha512', 'kept-key')
          .update(verification?.body ?? '')
          .digest('hex'),
      );
    });

    it('update merges global-configuration: {"enabled": false} alone keeps stages and enforcement-level', async () => {
      const created = await createTask(g.std, {
        name: uniqueName('task'),
        'global-configuration': { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(created, 201);
      const id = created.body.data.id as string;
      const res = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', attributes: { 'global-configuration': { enabled: false } } },
      });
      expectStatus(res, 200);
      expect(res.body.data.attributes['global-configuration']).toEqual({
        enabled: false,
        stages: ['post_plan', 'pre_plan'],
        'enforcement-level': 'mandatory',
      });
      const stagesOnly = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', attributes: { 'global-configuration': { stages: ['post_apply'] } } },
      });
      expectStatus(stagesOnly, 200);
      expect(stagesOnly.body.data.attributes['global-configuration']).toEqual({
        enabled: false,
        stages: ['post_apply'],
        'enforcement-level': 'mandatory',
      });
      const shown = await api(g.h, 'get', `/tasks/${id}`, g.std.organizationToken);
      expect(shown.body.data.attributes['global-configuration']).toEqual(stagesOnly.body.data.attributes['global-configuration']);
    });

    it('a free organization (not entitled) has no global-configuration attribute, and global options sent are ignored', async () => {
      const organization = await createOrganization(g.h, uniqueName('golden-free-global'), { edition: 'free' });
      const token = await createOrganizationToken(g.h, organization);
      const fixture: Fixture = { organization, organizationToken: token, workspaceId: '', teamId: '' };
      const name = uniqueName('task');
      const created = await createTask(fixture, {
        name,
        'global-configuration': { enabled: true, stages: ['pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(created, 201);
      const id = expectTask(created.body.data, {
        organization,
        name,
        url: g.taskServer.url,
        description: null,
        enabled: true,
        global: undefined,
      });
      expect(created.body.data.attributes).not.toHaveProperty('global-configuration');

      const updated = await api(g.h, 'patch', `/tasks/${id}`, token, {
        data: { type: 'tasks', attributes: { 'global-configuration': { enabled: true, stages: ['post_plan'] } } },
      });
      expectStatus(updated, 200);
      expect(updated.body.data.attributes).not.toHaveProperty('global-configuration');
      const stored = await g.h.orm.em.fork().findOneOrFail(RunTask, { id });
      expect({ enabled: stored.globalEnabled, stages: stored.globalStages, level: stored.globalEnforcementLevel }).toEqual({
        enabled: false,
        stages: [],
        level: 'advisory',
      });
    });

    it('description of 300 characters is accepted; 301 → 422 at /data/attributes/description (create and update)', async () => {
      const ok = await createTask(g.std, { name: uniqueName('task'), description: 'é'.repeat(300) });
      expectStatus(ok, 201);
      expect(ok.body.data.attributes.description).toBe('é'.repeat(300));
      const id = ok.body.data.id as string;
      expectError(await createTask(g.std, { name: uniqueName('task'), description: 'x'.repeat(301) }), 422, '/data/attributes/description');
      const patched = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', attributes: { description: 'x'.repeat(301) } },
      });
      expectError(patched, 422, '/data/attributes/description');
      expect((await api(g.h, 'get', `/tasks/${id}`, g.std.organizationToken)).body.data.attributes.description).toBe('é'.repeat(300));
    });

    it('a name with a space → 422 at /data/attributes/name (create and update)', async () => {
      const name = `golden task ${uniqueName('n')}`;
      expectError(await createTask(g.std, { name }), 422, '/data/attributes/name');
      const { id } = await newTask(g.std);
      expectError(
        await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, { data: { type: 'tasks', attributes: { name } } }),
        422,
        '/data/attributes/name',
      );
      const list = await api(g.h, 'get', `/organizations/${g.std.organization}/tasks?page%5Bsize%5D=100`, g.std.organizationToken);
      expect((list.body.data as { attributes: { name: string } }[]).map((task) => task.attributes.name)).not.toContain(name);
    });

    it.each(['hook', 'Task', ''])('category %j → 422 at /data/attributes/category', async (category) => {
      expectError(await createTask(g.std, { name: uniqueName('task'), category }), 422, '/data/attributes/category');
    });

    it('a duplicate name in the organization → 422 "has already been taken" at /data/attributes/name; another organization may reuse it', async () => {
      const { name } = await newTask(g.std);
      const error = expectError(await createTask(g.std, { name }), 422, '/data/attributes/name');
      expect(error.detail).toContain('has already been taken');
      const { id } = await newTask(g.std);
      const renamed = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, { data: { type: 'tasks', attributes: { name } } });
      expect(expectError(renamed, 422, '/data/attributes/name').detail).toContain('has already been taken');
      const other = await seedOrganization(g.h, uniqueName('golden-dup'));
      expectStatus(await createTask(other, { name }), 201);
    });

    it('delete → 204 without a body; removes its workspace tasks; existing task results keep their snapshot; repeat → 404', async () => {
      const { fixture, taskId, taskName, workspaceTaskId, runId, stageIds } = await runWithTask(['post_plan']);
      const stage = await api(g.h, 'get', `/task-stages/${stageIds[0]}`, fixture.organizationToken);
      const resultId = stage.body.data.relationships['task-results'].data[0].id as string;

      const res = await api(g.h, 'delete', `/tasks/${taskId}`, fixture.organizationToken);
      expectStatus(res, 204);
      expect(res.text).toBe('');
      expectNotFound(await api(g.h, 'get', `/tasks/${taskId}`, fixture.organizationToken));
      expectNotFound(await api(g.h, 'get', `/workspaces/${fixture.workspaceId}/tasks/${workspaceTaskId}`, fixture.organizationToken));
      const associations = await api(g.h, 'get', `/workspaces/${fixture.workspaceId}/tasks`, fixture.organizationToken);
      expect(associations.body.data).toEqual([]);
      expectPagination(associations, 0);

      const result = await api(g.h, 'get', `/task-results/${resultId}`, fixture.organizationToken);
      expectStatus(result, 200);
      expectTaskResult(result.body.data, {
        stageId: stageIds[0] ?? '',
        taskId,
        taskName,
        taskUrl: g.taskServer.url,
        stage: 'post_plan',
        workspaceTaskId,
        enforcement: 'mandatory',
      });
      expectStatus(await api(g.h, 'get', `/runs/${runId}`, fixture.organizationToken), 200);
      expectNotFound(await api(g.h, 'delete', `/tasks/${taskId}`, fixture.organizationToken));
    });
  });
});
