import { beforeAll, describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { uniqueName } from '../../../test/support/assertions.ts';
import { api, createWorkspace, type Fixture, seedOrganization } from '../../../test/support/fixtures.ts';
import {
  expectIncludeError,
  expectPagination,
  expectStatus,
  expectTask,
  expectWorkspace,
  expectWorkspaceTask,
  GLOBAL_DEFAULT,
} from './run-tasks-golden/documents.ts';
import { useRunTasksGolden } from './run-tasks-golden/setup.ts';

/**
 * Golden tests: every run task endpoint, request and response, checked field by field against
 * what go-tfe, the provider and the Terraform CLI decode (docs/api.md, "Compatibility").
 * Documents are compared whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails.
 */
describe('run tasks API golden documents', () => {
  const g = useRunTasksGolden();
  const { createTask, newTask, newAssociation } = g;

  describe('organization tasks', () => {
    it('create → 201 with the whole tasks document; global-configuration stage order kept; hmac-key never echoed', async () => {
      const name = uniqueName('task');
      const before = g.taskServer.requests.length;
      const res = await createTask(g.std, {
        name,
        description: null,
        'hmac-key': 'golden-secret',
        enabled: true,
        'global-configuration': { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(res, 201);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTask(res.body.data, {
        organization: g.std.organization,
        name,
        url: g.taskServer.url,
        description: null,
        enabled: true,
        global: { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expect(res.text).not.toContain('golden-secret');
      // The verification request was sent once, signed with the key.
      expect(g.taskServer.requests.length).toBe(before + 1);
      const verification = g.taskServer.requests[before];
      expect(verification?.headers['x-tfc-task-signature']).toBe(
        createHmac('sha512', 'golden-secret')
          .update(verification?.body ?? '')
          .digest('hex'),
      );
    });

    it('create accepts `hmac_key` (underscore) and signs the verification with it', async () => {
      const before = g.taskServer.requests.length;
      const name = uniqueName('task');
      const res = await createTask(g.std, { name, hmac_key: 'underscore-secret' });
      expectStatus(res, 201);
      expect(res.body.data.attributes['hmac-key']).toBeNull();
      expect(res.body.data.attributes).not.toHaveProperty('hmac_key');
      const verification = g.taskServer.requests[before];
      expect(verification?.headers['x-tfc-task-signature']).toBe(
        createHmac('sha512', 'underscore-secret')
          .update(verification?.body ?? '')
          .digest('hex'),
      );
    });

    it('`enabled` accepts "true"/"false" strings and answers booleans (create and update)', async () => {
      const name = uniqueName('task');
      const created = await createTask(g.std, { name, enabled: 'false', description: 'strings' });
      expectStatus(created, 201);
      const id = expectTask(created.body.data, {
        organization: g.std.organization,
        name,
        url: g.taskServer.url,
        description: 'strings',
        enabled: false,
        global: GLOBAL_DEFAULT,
      });
      const enabled = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', attributes: { enabled: 'true' } },
      });
      expectStatus(enabled, 200);
      expect(enabled.body.data.attributes.enabled).toBe(true);
      const disabled = await api(g.h, 'patch', `/tasks/${id}`, g.std.organizationToken, {
        data: { type: 'tasks', attributes: { enabled: 'false' } },
      });
      expectStatus(disabled, 200);
      expect(disabled.body.data.attributes.enabled).toBe(false);
      const shown = await api(g.h, 'get', `/tasks/${id}`, g.std.organizationToken);
      expect(shown.body.data.attributes.enabled).toBe(false);
    });

    it('show → 200 with the same document as create', async () => {
      const name = uniqueName('task');
      const created = await createTask(g.std, { name, description: 'show me' });
      expectStatus(created, 201);
      const res = await api(g.h, 'get', `/tasks/${created.body.data.id}`, g.std.organizationToken);
      expectStatus(res, 200);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTask(res.body.data, {
        organization: g.std.organization,
        name,
        url: g.taskServer.url,
        description: 'show me',
        enabled: true,
        global: GLOBAL_DEFAULT,
      });
      expect(res.body.data).toEqual(created.body.data);
    });

    it('list → 200 with tasks documents, links and meta.pagination; paged', async () => {
      const fixture = await seedOrganization(g.h, uniqueName('golden-list'));
      const first = await newTask(fixture);
      const second = await newTask(fixture, { description: 'second' });
      const third = await newTask(fixture, { enabled: false });
      const res = await api(g.h, 'get', `/organizations/${fixture.organization}/tasks`, fixture.organizationToken);
      expectStatus(res, 200);
      expectPagination(res, 3);
      expect(res.body).not.toHaveProperty('included');
      expect(res.body.data).toHaveLength(3);
      const [a, b, c] = res.body.data as unknown[];
      const base = { organization: fixture.organization, url: g.taskServer.url, global: GLOBAL_DEFAULT };
      expectTask(a, { ...base, name: first.name, description: null, enabled: true });
      expectTask(b, { ...base, name: second.name, description: 'second', enabled: true });
      expectTask(c, { ...base, name: third.name, description: null, enabled: false });

      const paged = await api(
        g.h,
        'get',
        `/organizations/${fixture.organization}/tasks?page%5Bnumber%5D=2&page%5Bsize%5D=2`,
        fixture.organizationToken,
      );
      expectStatus(paged, 200);
      expectPagination(paged, 3, 2, 2);
      expect((paged.body.data as { id: string }[]).map((task) => task.id)).toEqual([third.id]);

      // Past the last page: no row carries the total, which is still counted.
      const past = await api(
        g.h,
        'get',
        `/organizations/${fixture.organization}/tasks?page%5Bnumber%5D=3&page%5Bsize%5D=2`,
        fixture.organizationToken,
      );
      expectStatus(past, 200);
      expect(past.body.data).toEqual([]);
      expect(past.body.meta.pagination).toMatchObject({ 'current-page': 3, 'total-count': 3, 'total-pages': 2 });
    });

    it("counts the organization's tasks exactly: API creates and deletes, rows written directly, nothing of other organizations", async () => {
      const fixture = await seedOrganization(g.h, uniqueName('golden-count'));
      const other = await seedOrganization(g.h, uniqueName('golden-count-other'));
      const total = async (): Promise<unknown> =>
        (await api(g.h, 'get', `/organizations/${fixture.organization}/tasks?page%5Bsize%5D=1`, fixture.organizationToken)).body.meta
          .pagination['total-count'];
      expect(await total()).toBe(0);
      const first = await newTask(fixture);
      await newTask(fixture);
      await newTask(other);
      expect(await total()).toBe(2);
      expectStatus(await api(g.h, 'delete', `/tasks/${first.id}`, fixture.organizationToken), 204);
      expect(await total()).toBe(1);
      // Written past the API (a bulk load, a manual fix): the count follows the rows all the same.
      const connection = g.h.orm.em.fork().getConnection();
      const [org] = await connection.execute<{ id: string }[]>(`select id from organizations where name = ?`, [fixture.organization]);
      await connection.execute(
        `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         select 'task-' || substr(md5(random()::text), 1, 16), ?, 'bulk-' || n, 'https://example.com', 'task', true, false, '{}', 'advisory', now(), now()
           from generate_series(1, 5) n`,
        [org?.id],
      );
      expect(await total()).toBe(6);
      await connection.execute(`delete from run_tasks where organization_id = ? and name like 'bulk-%'`, [org?.id]);
      expect(await total()).toBe(1);
    });

    describe('include', () => {
      let fixture: Fixture;
      let task: { id: string; name: string };
      let otherWorkspaceId: string;
      let otherWorkspaceName: string;
      let workspaceTaskIds: string[];

      beforeAll(async () => {
        fixture = await seedOrganization(g.h, uniqueName('golden-include'));
        task = await newTask(fixture);
        otherWorkspaceName = uniqueName('ws');
        otherWorkspaceId = await createWorkspace(g.h, fixture.organization, fixture.organizationToken, otherWorkspaceName);
        workspaceTaskIds = [
          await newAssociation(fixture, fixture.workspaceId, task.id, { 'enforcement-level': 'advisory' }),
          await newAssociation(fixture, otherWorkspaceId, task.id, { 'enforcement-level': 'mandatory', stages: ['pre_plan'] }),
        ];
      });

      const expectedTask = () => ({
        organization: fixture.organization,
        name: task.name,
        url: g.taskServer.url,
        description: null,
        enabled: true,
        global: GLOBAL_DEFAULT,
        workspaceTaskIds,
      });

      function expectIncludedWorkspaceTasks(included: unknown[]): void {
        const byId = new Map(included.map((resource) => [(resource as { id: string }).id, resource]));
        expectWorkspaceTask(byId.get(workspaceTaskIds[0] ?? ''), {
          workspaceId: fixture.workspaceId,
          taskId: task.id,
          enforcement: 'advisory',
          stages: ['post_plan'],
        });
        expectWorkspaceTask(byId.get(workspaceTaskIds[1] ?? ''), {
          workspaceId: otherWorkspaceId,
          taskId: task.id,
          enforcement: 'mandatory',
          stages: ['pre_plan'],
        });
      }

      it('without include: the workspace-tasks relationship alone, no included', async () => {
        const res = await api(g.h, 'get', `/tasks/${task.id}`, fixture.organizationToken);
        expectStatus(res, 200);
        expectTask(res.body.data, expectedTask());
        expect(res.body).not.toHaveProperty('included');
      });

      it.each(['workspace_tasks', 'workspace-tasks'])('show ?include=%s → included workspace-tasks documents', async (include) => {
        const res = await api(g.h, 'get', `/tasks/${task.id}?include=${include}`, fixture.organizationToken);
        expectStatus(res, 200);
        expectTask(res.body.data, expectedTask());
        expect(res.body.included).toHaveLength(2);
        expectIncludedWorkspaceTasks(res.body.included);
      });

      it.each(['workspace_tasks.workspace', 'workspace-tasks.workspace'])(
        'show and list ?include=%s → workspace-tasks and their workspaces',
        async (include) => {
          for (const path of [`/tasks/${task.id}`, `/organizations/${fixture.organization}/tasks`]) {
            const res = await api(g.h, 'get', `${path}?include=${include}`, fixture.organizationToken);
            expectStatus(res, 200);
            const included = res.body.included as { type: string; id: string }[];
            expect(included.map((resource) => resource.type).sort()).toEqual([
              'workspace-tasks',
              'workspace-tasks',
              'workspaces',
              'workspaces',
            ]);
            expectIncludedWorkspaceTasks(included.filter((resource) => resource.type === 'workspace-tasks'));
            const workspaces = new Map(
              included.filter((resource) => resource.type === 'workspaces').map((resource) => [resource.id, resource]),
            );
            expectWorkspace(workspaces.get(fixture.workspaceId), fixture.workspaceId, `${fixture.organization}-ws`, fixture.organization);
            expectWorkspace(workspaces.get(otherWorkspaceId), otherWorkspaceId, otherWorkspaceName, fixture.organization);
          }
        },
      );

      it('list without include (one statement) → each task with its workspace-tasks in the order attached, none for a task without', async () => {
        const own = await seedOrganization(g.h, uniqueName('golden-attached'));
        const [attached, bare] = [await newTask(own), await newTask(own)];
        const otherWorkspace = await createWorkspace(g.h, own.organization, own.organizationToken, uniqueName('ws'));
        const ids = [
          await newAssociation(own, otherWorkspace, attached.id, { 'enforcement-level': 'advisory' }),
          await newAssociation(own, own.workspaceId, attached.id, { 'enforcement-level': 'mandatory' }),
        ];
        const res = await api(g.h, 'get', `/organizations/${own.organization}/tasks`, own.organizationToken);
        expectStatus(res, 200);
        const expected = {
          organization: own.organization,
          url: g.taskServer.url,
          description: null,
          enabled: true,
          global: GLOBAL_DEFAULT,
        };
        expect((res.body.data as { id: string }[]).map((resource) => resource.id)).toEqual([attached.id, bare.id]);
        expectTask(res.body.data[0], { ...expected, name: attached.name, workspaceTaskIds: ids });
        expectTask(res.body.data[1], { ...expected, name: bare.name, workspaceTaskIds: [] });
      });

      it('list ?include=workspace_tasks → included workspace-tasks documents, with meta', async () => {
        const res = await api(
          g.h,
          'get',
          `/organizations/${fixture.organization}/tasks?include=workspace_tasks`,
          fixture.organizationToken,
        );
        expectStatus(res, 200);
        expectPagination(res, 1);
        expectTask(res.body.data[0], expectedTask());
        expectIncludedWorkspaceTasks(res.body.included);
      });

      it.each(['workspaces', 'workspace_tasks,organization', 'tasks', 'workspace_tasks.run'])(
        'unknown ?include=%s → 400 naming the include parameter (show and list)',
        async (include) => {
          expectIncludeError(await api(g.h, 'get', `/tasks/${task.id}?include=${include}`, fixture.organizationToken));
          expectIncludeError(
            await api(g.h, 'get', `/organizations/${fixture.organization}/tasks?include=${include}`, fixture.organizationToken),
          );
        },
      );
    });
  });
});
