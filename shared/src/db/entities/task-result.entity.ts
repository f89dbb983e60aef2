import { defineEntity, p } from '@mikro-orm/core';
import { ENFORCEMENT_LEVELS, RUN_STAGES, TASK_RESULT_STATUSES } from '../../domain/statuses.ts';
import { TaskStage } from './task-stage.entity.ts';

const TaskResultSchema = defineEntity({
  name: 'TaskResult',
  tableName: 'task_results',
  uniques: [
    // One result per task per stage; a task attached to the workspace and also global counts once.
    { name: 'task_results_stage_task_unique', properties: ['taskStage', 'taskId'] },
    { name: 'task_results_stage_workspace_task_unique', properties: ['taskStage', 'workspaceTaskId'] },
  ],
  indexes: [{ name: 'task_results_status_deadline_idx', properties: ['status', 'progressDeadline'] }],
  properties: {
    id: p.string().length(32).primary(),
    taskStage: () => p.manyToOne(TaskStage).deleteRule('cascade'),
    // Snapshot, not foreign keys: deleting a task keeps the results already created (DESIGN §3).
    taskId: p.string().length(32),
    workspaceTaskId: p.string().length(32).nullable(),
    taskName: p.string().length(255),
    taskUrl: p.text(),
    hmacKeyEncrypted: p.text().nullable(),
    enforcementLevel: p.enum(ENFORCEMENT_LEVELS),
    stage: p.enum(RUN_STAGES),
    isSpeculative: p.boolean().default(false),
    status: p.enum(TASK_RESULT_STATUSES).default('pending'),
    statusTimestamps: p
      .json<Record<string, string>>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
    message: p.text().nullable(),
    url: p.text().nullable(),
    callbackTokenHash: p.string().length(64).nullable().unique(),
    // Encrypted so a re-dispatch of the same result carries the same access token.
    callbackTokenEncrypted: p.text().nullable(),
    acknowledgedAt: p.datetime().nullable(),
    nextAttemptAt: p.datetime().nullable(),
    progressDeadline: p.datetime().nullable(),
    hardDeadline: p.datetime().nullable(),
    attempts: p.integer().default(0),
    outcomesCount: p.integer().default(0),
    version: p.integer().version(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class TaskResult extends TaskResultSchema.class {}
TaskResultSchema.setClass(TaskResult);
