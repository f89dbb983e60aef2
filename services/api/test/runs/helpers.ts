import { expect } from '@jest/globals';
import { type EnforcementLevel, newId, type RunStage, type RunStatus } from '@runtasks/shared/domain';
import { Run, RunTask, TaskResult, TaskStage, WorkspaceTask } from '@runtasks/shared/db';
import { type Harness } from '../../../../test/support/harness.ts';
import { api } from '../../../../test/support/fixtures.ts';
import { expectError, type Response } from '../../../../test/support/assertions.ts';

/** Run documents, and run tasks, stages and results written or read straight from the database. */

export function expectTransitionNotAllowed(res: Response): void {
  expectError(res, 409);
  expect(res.body.errors[0].title).toBe('transition not allowed');
}

export function runDocument(workspaceId: string, attributes: Record<string, unknown> = {}) {
  return { data: { type: 'runs', attributes, relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } } };
}

export async function externalIdOf(h: Harness, organization: string): Promise<string> {
  const res = await api(h, 'get', `/organizations/${organization}`, h.adminToken);
  return res.body.data.attributes['external-id'] as string;
}

export interface TaskOptions {
  enabled?: boolean;
  global?: { stages: RunStage[]; enforcementLevel: EnforcementLevel };
}

/** Run tasks have no API yet: they are created directly through the ORM. */
export async function createRunTask(h: Harness, organizationId: string, name: string, options: TaskOptions = {}): Promise<string> {
  const em = h.orm.em.fork();
  const task = em.create(RunTask, {
    id: newId('task'),
    organization: organizationId,
    name,
    url: `https://tasks.example.test/${name}`,
    enabled: options.enabled ?? true,
    globalEnabled: options.global !== undefined,
    globalStages: options.global?.stages ?? [],
    globalEnforcementLevel: options.global?.enforcementLevel ?? 'advisory',
  });
  await em.flush();
  return task.id;
}

export async function attachTask(
  h: Harness,
  workspaceId: string,
  taskId: string,
  stages: RunStage[],
  enforcementLevel: EnforcementLevel = 'advisory',
): Promise<string> {
  const em = h.orm.em.fork();
  const association = em.create(WorkspaceTask, {
    id: newId('workspaceTask'),
    workspace: workspaceId,
    task: taskId,
    enforcementLevel,
    stages,
  });
  await em.flush();
  return association.id;
}

export async function stagesInDb(h: Harness, runId: string): Promise<TaskStage[]> {
  return h.orm.em.fork().find(TaskStage, { run: runId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function resultsInDb(h: Harness, runId: string): Promise<TaskResult[]> {
  return h.orm.em.fork().find(TaskResult, { taskStage: { run: runId } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function setRunStatus(h: Harness, runId: string, status: RunStatus): Promise<void> {
  expect(await h.orm.em.fork().nativeUpdate(Run, { id: runId }, { status })).toBe(1);
}
