import { beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createTeam,
  createTeamToken,
  createWorkspace,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../test/support/fixtures.ts';
import { expectPagination, expectStatus, expectWorkspaceTask, type Stage } from './run-tasks-golden/documents.ts';
import { useRunTasksGolden } from './run-tasks-golden/setup.ts';

/**
 * Golden tests: every run task endpoint, request and response, checked field by field against
 * what go-tfe, the provider and the Terraform CLI decode (docs/api.md, "Compatibility").
 * Documents are compared whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails.
 */
describe('run tasks API golden documents', () => {
  const g = useRunTasksGolden();
  const { createTask, newTask, associate, newAssociation } = g;

  describe('workspace task associations', () => {
    let fixture: Fixture;
    let taskId: string;

    beforeAll(async () => {
      fixture = await seedOrganization(g.h, uniqueName('golden-wstask'));
      taskId = (await newTask(fixture)).id;
    });

    /** A workspace of its own per test: one association per (workspace, task). */
    const freshWorkspace = () => createWorkspace(g.h, fixture.organization, fixture.organizationToken, uniqueName('ws'));

    it('associate → 201 WITH the document; stages order preserved, stage == stages[0]', async () => {
      const workspaceId = await freshWorkspace();
      const res = await associate(fixture.organizationToken, workspaceId, taskId, {
        'enforcement-level': 'mandatory',
        stages: ['post_plan', 'pre_plan'],
      });
      expectStatus(res, 201);
      expect(Object.keys(res.body)).toEqual(['data']);
      const id = expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'mandatory', stages: ['post_plan', 'pre_plan'] });
      const task = await api(g.h, 'get', `/tasks/${taskId}`, fixture.organizationToken);
      expect(task.body.data.relationships['workspace-tasks'].data).toContainEqual({ id, type: 'workspace-tasks' });
    });

    it.each<[string, Record<string, unknown>, Stage[]]>([
      ['only stage: pre_apply', { stage: 'pre_apply' }, ['pre_apply']],
      ['neither stage nor stages', {}, ['post_plan']],
      ['stages wins over stage', { stage: 'pre_plan', stages: ['post_apply'] }, ['post_apply']],
      [
        'all four stages',
        { stages: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] },
        ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'],
      ],
      ['stage: post_apply', { stage: 'post_apply' }, ['post_apply']],
    ])('associate with %s → stages %j', async (_label, attributes, stages) => {
      const workspaceId = await freshWorkspace();
      const res = await associate(fixture.organizationToken, workspaceId, taskId, { 'enforcement-level': 'advisory', ...attributes });
      expectStatus(res, 201);
      expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'advisory', stages });
    });

    it('show → 200; list → 200 with meta.pagination', async () => {
      const workspaceId = await freshWorkspace();
      const secondTask = await newTask(fixture);
      const first = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory', stages: ['pre_plan'] });
      const second = await newAssociation(fixture, workspaceId, secondTask.id, { 'enforcement-level': 'mandatory' });
      const shown = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks/${first}`, fixture.organizationToken);
      expectStatus(shown, 200);
      expect(Object.keys(shown.body)).toEqual(['data']);
      expectWorkspaceTask(shown.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: ['pre_plan'] });

      const list = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken);
      expectStatus(list, 200);
      expectPagination(list, 2);
      const byId = new Map((list.body.data as { id: string }[]).map((resource) => [resource.id, resource]));
      expect([...byId.keys()].sort()).toEqual([first, second].sort());
      expectWorkspaceTask(byId.get(first), { workspaceId, taskId, enforcement: 'advisory', stages: ['pre_plan'] });
      expectWorkspaceTask(byId.get(second), { workspaceId, taskId: secondTask.id, enforcement: 'mandatory', stages: ['post_plan'] });

      const paged = await api(
        g.h,
        'get',
        `/workspaces/${workspaceId}/tasks?page%5Bsize%5D=1&page%5Bnumber%5D=2`,
        fixture.organizationToken,
      );
      expectStatus(paged, 200);
      expectPagination(paged, 2, 2, 1);
      expect(paged.body.data).toHaveLength(1);
    });

    it('update → 200 with the document: all four stages accepted; only `stage` sets stages; omitted attributes kept', async () => {
      const workspaceId = await freshWorkspace();
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory', stages: ['post_plan'] });
      const patch = (attributes: Record<string, unknown>) =>
        api(g.h, 'patch', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken, {
          data: { type: 'workspace-tasks', attributes },
        });

      const all = await patch({ stages: ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'] });
      expectStatus(all, 200);
      expectWorkspaceTask(all.body.data, {
        workspaceId,
        taskId,
        enforcement: 'advisory',
        stages: ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'],
      });
      for (const stage of ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] as const) {
        const res = await patch({ stage });
        expectStatus(res, 200);
        expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: [stage] });
      }
      const enforcement = await patch({ 'enforcement-level': 'mandatory' });
      expectStatus(enforcement, 200);
      expectWorkspaceTask(enforcement.body.data, { workspaceId, taskId, enforcement: 'mandatory', stages: ['post_apply'] });
      const shown = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expect(shown.body.data).toEqual(enforcement.body.data);
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['stages: [plan]', { stages: ['plan'] }, '/data/attributes/stages/0'],
      ['stage: apply', { stage: 'apply' }, '/data/attributes/stage'],
      ['stages: []', { stages: [] }, '/data/attributes/stages'],
      ['stages repeated', { stages: ['pre_plan', 'pre_plan'] }, '/data/attributes/stages'],
      ['enforcement-level: blocking', { 'enforcement-level': 'blocking' }, '/data/attributes/enforcement-level'],
    ])('invalid %s → 422 on create and on update', async (_label, attributes, pointer) => {
      const workspaceId = await freshWorkspace();
      expectError(
        await associate(fixture.organizationToken, workspaceId, taskId, { 'enforcement-level': 'advisory', ...attributes }),
        422,
        pointer,
      );
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' });
      const res = await api(g.h, 'patch', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken, {
        data: { type: 'workspace-tasks', attributes },
      });
      expectError(res, 422, pointer);
      const shown = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expectWorkspaceTask(shown.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: ['post_plan'] });
    });

    it('a task of another organization → 404, and nothing is associated', async () => {
      const other = await seedOrganization(g.h, uniqueName('golden-other'));
      const foreignTask = await newTask(other);
      const workspaceId = await freshWorkspace();
      const res = await associate(fixture.organizationToken, workspaceId, foreignTask.id, { 'enforcement-level': 'advisory' });
      expectNotFound(res);
      const list = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken);
      expect(list.body.data).toEqual([]);
    });

    it('a team with workspace run-tasks permission can associate; a team without it → 404', async () => {
      const workspaceId = await freshWorkspace();
      const allowedTeam = await createTeam(g.h, fixture.organization, fixture.organizationToken, uniqueName('team-run-tasks'));
      await grantWorkspace(g.h, fixture.organizationToken, allowedTeam, workspaceId, { access: 'custom', runs: 'read', 'run-tasks': true });
      const deniedTeam = await createTeam(g.h, fixture.organization, fixture.organizationToken, uniqueName('team-write'));
      // "write" access: runs apply, but not run-tasks.
      await grantWorkspace(g.h, fixture.organizationToken, deniedTeam, workspaceId, { access: 'write' });
      const allowedToken = await createTeamToken(g.h, fixture.organizationToken, allowedTeam);
      const deniedToken = await createTeamToken(g.h, fixture.organizationToken, deniedTeam);

      expectNotFound(await associate(deniedToken, workspaceId, taskId, { 'enforcement-level': 'advisory' }));
      expectNotFound(await api(g.h, 'get', `/workspaces/${workspaceId}/tasks`, deniedToken));
      const res = await associate(allowedToken, workspaceId, taskId, { 'enforcement-level': 'advisory', stages: ['pre_plan'] });
      expectStatus(res, 201);
      const id = expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: ['pre_plan'] });
      expectNotFound(await api(g.h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, deniedToken));
      expectNotFound(await api(g.h, 'delete', `/workspaces/${workspaceId}/tasks/${id}`, deniedToken));
      const list = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks`, allowedToken);
      expectStatus(list, 200);
      expect((list.body.data as { id: string }[]).map((resource) => resource.id)).toEqual([id]);
    });

    it('a duplicate association → 422, and the first one is untouched', async () => {
      const workspaceId = await freshWorkspace();
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' });
      const error = expectError(
        await associate(fixture.organizationToken, workspaceId, taskId, { 'enforcement-level': 'mandatory' }),
        422,
        '/data/relationships/task',
      );
      expect(error.detail).toContain('has already been taken');
      const list = await api(g.h, 'get', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken);
      expect(list.body.data).toHaveLength(1);
      expectWorkspaceTask(list.body.data[0], { workspaceId, taskId, enforcement: 'advisory', stages: ['post_plan'] });
      expect(list.body.data[0].id).toBe(id);
    });

    it('delete → 204 without a body; repeat delete → 404; the task itself stays', async () => {
      const workspaceId = await freshWorkspace();
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' });
      const res = await api(g.h, 'delete', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expectStatus(res, 204);
      expect(res.text).toBe('');
      expectNotFound(await api(g.h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken));
      const repeat = await api(g.h, 'delete', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expectNotFound(repeat);
      const task = await api(g.h, 'get', `/tasks/${taskId}`, fixture.organizationToken);
      expectStatus(task, 200);
      expect(task.body.data.relationships['workspace-tasks'].data).not.toContainEqual({ id, type: 'workspace-tasks' });
    });
  });

  describe('editions', () => {
    it('free: a second run task → 422 with a clear message, nothing stored, no verification sent', async () => {
      const organization = await createOrganization(g.h, uniqueName('golden-free'), { edition: 'free' });
      const fixture: Fixture = {
        organization,
        organizationToken: await createOrganizationToken(g.h, organization),
        workspaceId: '',
        teamId: '',
      };
      await newTask(fixture);
      const before = g.taskServer.requests.length;
      const error = expectError(await createTask(fixture, { name: uniqueName('task') }), 422);
      expect(error.title).toBe('run task limit reached');
      expect(error.detail).toMatch(/free edition/i);
      expect(error.detail).toContain('1 run task');
      expect(g.taskServer.requests.length).toBe(before);
      const list = await api(g.h, 'get', `/organizations/${organization}/tasks`, fixture.organizationToken);
      expectPagination(list, 1);
    });

    it('free: the task applies to ten workspaces; the 11th → 422 with a clear message; freeing one makes room', async () => {
      const organization = await createOrganization(g.h, uniqueName('golden-free-ws'), { edition: 'free' });
      const token = await createOrganizationToken(g.h, organization);
      const fixture: Fixture = { organization, organizationToken: token, workspaceId: '', teamId: '' };
      const { id: taskId } = await newTask(fixture);
      const workspaces: string[] = [];
      for (let index = 0; index < 11; index += 1) workspaces.push(await createWorkspace(g.h, organization, token, uniqueName('free-ws')));
      const associations: string[] = [];
      for (const workspaceId of workspaces.slice(0, 10)) {
        associations.push(await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' }));
      }
      const eleventh = workspaces[10] ?? '';
      const error = expectError(await associate(token, eleventh, taskId, { 'enforcement-level': 'advisory' }), 422);
      expect(error.title).toBe('run task workspace limit reached');
      expect(error.detail).toMatch(/free edition/i);
      expect(error.detail).toContain('10 workspaces');
      expect((await api(g.h, 'get', `/workspaces/${eleventh}/tasks`, token)).body.data).toEqual([]);

      // An association on a workspace that already counts is no new workspace: updates still work.
      const update = await api(g.h, 'patch', `/workspaces/${workspaces[0]}/tasks/${associations[0]}`, token, {
        data: { type: 'workspace-tasks', attributes: { stages: ['pre_plan'] } },
      });
      expectStatus(update, 200);
      expectStatus(await api(g.h, 'delete', `/workspaces/${workspaces[0]}/tasks/${associations[0]}`, token), 204);
      expectStatus(await associate(token, eleventh, taskId, { 'enforcement-level': 'advisory' }), 201);
    });

    it('standard: unlimited run tasks and workspaces', async () => {
      const fixture = await seedOrganization(g.h, uniqueName('golden-standard'));
      const tasks = [await newTask(fixture), await newTask(fixture), await newTask(fixture)];
      for (let index = 0; index < 11; index += 1) {
        const workspaceId = await createWorkspace(g.h, fixture.organization, fixture.organizationToken, uniqueName('std-ws'));
        for (const task of tasks) await newAssociation(fixture, workspaceId, task.id, { 'enforcement-level': 'advisory' });
      }
      const list = await api(g.h, 'get', `/organizations/${fixture.organization}/tasks?include=workspace_tasks`, fixture.organizationToken);
      expectPagination(list, 3);
      expect(list.body.included).toHaveLength(33);
    });

    it('the entitlement set reports the limits: free 1 / 10 without global run tasks, standard unlimited with them', async () => {
      const free = await createOrganization(g.h, uniqueName('golden-ent-free'), { edition: 'free' });
      const freeToken = await createOrganizationToken(g.h, free);
      const freeSet = await api(g.h, 'get', `/organizations/${free}/entitlement-set`, freeToken);
      expectStatus(freeSet, 200);
      expect(freeSet.body.data.type).toBe('entitlement-sets');
      expect(freeSet.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': 1,
        'run-task-workspace-limit': 10,
        'global-run-tasks': false,
      });
      const standardSet = await api(g.h, 'get', `/organizations/${g.std.organization}/entitlement-set`, g.std.organizationToken);
      expectStatus(standardSet, 200);
      expect(standardSet.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': null,
        'run-task-workspace-limit': null,
        'global-run-tasks': true,
      });
    });
  });
});
