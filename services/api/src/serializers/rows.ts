import type { RunTaskFields } from './run-task.serializer.ts';
import type { TaskStageView, TaskResultView } from './task-stage.serializer.ts';
import type { Instant } from '../http/jsonapi.ts';

/**
 * Rows of the raw read paths as the views the serializers take, without the ORM's hydration. The
 * driver hands timestamps over as PostgreSQL prints them (MikroORM's type parsers keep them text), and
 * they stay text until the serializer prints them (`timestamp` in jsonapi.ts), no Date made on the way.
 */

/** The task_results columns `taskResultFromRow` reads: the row's shape, for a select list (`columnList`). */
export const TASK_RESULT_COLUMNS = [
  'id',
  'task_stage_id',
  'task_id',
  'workspace_task_id',
  'task_name',
  'task_url',
  'enforcement_level',
  'stage',
  'is_speculative',
  'status',
  'status_timestamps',
  'message',
  'url',
  'outcomes_count',
  'created_at',
  'updated_at',
] as const;

export type TaskResultRow = {
  id: string;
  task_stage_id: string;
  task_id: string;
  workspace_task_id: string | null;
  task_name: string;
  task_url: string;
  enforcement_level: TaskResultView['enforcementLevel'];
  stage: TaskResultView['stage'];
  is_speculative: boolean;
  status: TaskResultView['status'];
  status_timestamps: TaskResultView['statusTimestamps'];
  message: string | null;
  url: string | null;
  outcomes_count: number;
  created_at: Instant;
  updated_at: Instant;
};

/** A row of a left join that found nothing: every column of `T` null. */
export type Absent<T> = { [K in keyof T]: null };

// Re-exported only for task-stages.routes.ts and callback.routes.ts until they import from @runtasks/shared/db.
export { columnList, idList, idListSql } from '@runtasks/shared/db';

export function taskResultFromRow(row: TaskResultRow): TaskResultView {
  return {
    id: row.id,
    taskStage: { id: row.task_stage_id },
    taskId: row.task_id,
    workspaceTaskId: row.workspace_task_id,
    taskName: row.task_name,
    taskUrl: row.task_url,
    enforcementLevel: row.enforcement_level,
    stage: row.stage,
    isSpeculative: row.is_speculative,
    status: row.status,
    statusTimestamps: row.status_timestamps,
    message: row.message,
    url: row.url,
    outcomesCount: row.outcomes_count,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface TaskStageRow {
  id: string;
  run_id: string;
  stage: TaskStageView['stage'];
  status: TaskStageView['status'];
  status_timestamps: TaskStageView['statusTimestamps'];
  created_at: Instant;
  updated_at: Instant;
}

export function taskStageFromRow(row: TaskStageRow): TaskStageView {
  return {
    id: row.id,
    run: { id: row.run_id },
    stage: row.stage,
    status: row.status,
    statusTimestamps: row.status_timestamps,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export interface RunTaskRow {
  id: string;
  name: string;
  url: string;
  description: string | null;
  category: string;
  enabled: boolean;
  global_enabled: boolean;
  global_stages: RunTaskFields['globalStages'];
  global_enforcement_level: RunTaskFields['globalEnforcementLevel'];
  created_at: Instant;
  updated_at: Instant;
}

export function runTaskFromRow(row: RunTaskRow): RunTaskFields {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    description: row.description,
    category: row.category,
    enabled: row.enabled,
    globalEnabled: row.global_enabled,
    globalStages: row.global_stages,
    globalEnforcementLevel: row.global_enforcement_level,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
