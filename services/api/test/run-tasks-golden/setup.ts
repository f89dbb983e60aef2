import { afterAll, beforeAll } from '@jest/globals';
import { type Response, uniqueName } from '../../../../test/support/assertions.ts';
import { api, createRun, type Fixture, seedOrganization } from '../../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { type Enforcement, expectStatus, type Stage, startTaskServer, type TaskServer } from './documents.ts';

/** The API, a task server, a standard organization, and helpers that create tasks and runs with them. */
export function useRunTasksGolden() {
  const g = {} as {
    h: Harness;
    taskServer: TaskServer;
    /** A standard organization, entitled to global run tasks. */
    std: Fixture;
  };

  const taskDocument = (attributes: Record<string, unknown>) => ({
    data: { type: 'tasks', attributes: { category: 'task', url: g.taskServer.url, ...attributes } },
  });
  const createTask = (fixture: Fixture, attributes: Record<string, unknown>) =>
    api(g.h, 'post', `/organizations/${fixture.organization}/tasks`, fixture.organizationToken, taskDocument(attributes));

  async function newTask(fixture: Fixture, attributes: Record<string, unknown> = {}): Promise<{ id: string; name: string }> {
    const name = uniqueName('task');
    const res = await createTask(fixture, { name, ...attributes });
    expectStatus(res, 201);
    return { id: res.body.data.id as string, name };
  }

  const associationDocument = (taskId: string, attributes: Record<string, unknown>) => ({
    data: { type: 'workspace-tasks', attributes, relationships: { task: { data: { type: 'tasks', id: taskId } } } },
  });
  const associate = (token: string, workspaceId: string, taskId: string, attributes: Record<string, unknown>) =>
    api(g.h, 'post', `/workspaces/${workspaceId}/tasks`, token, associationDocument(taskId, attributes));

  async function newAssociation(
    fixture: Fixture,
    workspaceId: string,
    taskId: string,
    attributes: Record<string, unknown>,
  ): Promise<string> {
    const res = await associate(fixture.organizationToken, workspaceId, taskId, attributes);
    expectStatus(res, 201);
    return res.body.data.id as string;
  }

  async function stagesOf(fixture: Fixture, runId: string): Promise<Response> {
    const res = await api(g.h, 'get', `/runs/${runId}/task-stages`, fixture.organizationToken);
    expectStatus(res, 200);
    return res;
  }

  /** A fresh standard organization with a workspace running one task on `stages`: its run, stage ids and result ids. */
  async function runWithTask(
    stages: Stage[],
    enforcement: Enforcement = 'mandatory',
  ): Promise<{ fixture: Fixture; taskId: string; taskName: string; workspaceTaskId: string; runId: string; stageIds: string[] }> {
    const fixture = await seedOrganization(g.h, uniqueName('golden-run'));
    const task = await newTask(fixture);
    const workspaceTaskId = await newAssociation(fixture, fixture.workspaceId, task.id, { 'enforcement-level': enforcement, stages });
    const runId = await createRun(g.h, fixture.organizationToken, fixture.workspaceId);
    const listed = await stagesOf(fixture, runId);
    return {
      fixture,
      taskId: task.id,
      taskName: task.name,
      workspaceTaskId,
      runId,
      stageIds: (listed.body.data as { id: string }[]).map((stage) => stage.id),
    };
  }

  beforeAll(async () => {
    g.h = await startHarness();
    g.taskServer = await startTaskServer();
    g.std = await seedOrganization(g.h, uniqueName('golden-std'));
  });

  afterAll(async () => {
    await g.h?.close();
    g.taskServer?.server.closeAllConnections();
    await new Promise<void>((resolve) => (g.taskServer ? g.taskServer.server.close(() => resolve()) : resolve()));
  });
  return Object.assign(g, { taskDocument, createTask, newTask, associationDocument, associate, newAssociation, stagesOf, runWithTask });
}
