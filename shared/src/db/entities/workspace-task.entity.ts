import { defineEntity, p } from '@mikro-orm/core';
import { ENFORCEMENT_LEVELS } from '../../domain/statuses.ts';
import { RunTask } from './run-task.entity.ts';
import { Workspace } from './workspace.entity.ts';

const WorkspaceTaskSchema = defineEntity({
  name: 'WorkspaceTask',
  tableName: 'workspace_tasks',
  uniques: [{ name: 'workspace_tasks_workspace_task_unique', properties: ['workspace', 'task'] }],
  indexes: [{ name: 'workspace_tasks_task_idx', properties: ['task'] }],
  properties: {
    id: p.string().length(32).primary(),
    workspace: () => p.manyToOne(Workspace).deleteRule('cascade'),
    task: () => p.manyToOne(RunTask).deleteRule('cascade'),
    enforcementLevel: p.enum(ENFORCEMENT_LEVELS),
    // Order as the client sent it: go-tfe asserts `stages` round-trips and `stage == stages[0]`.
    stages: p.array(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class WorkspaceTask extends WorkspaceTaskSchema.class {}
WorkspaceTaskSchema.setClass(WorkspaceTask);
