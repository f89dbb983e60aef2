import type { TaskResult, TaskStage } from '@runtasks/shared/db';
import { selfLink, timestamp, toMany, toOne, type Resource, type Timestamps } from '../http/jsonapi.ts';
import { shownTaskUrl } from './task-url.ts';

/** What a stage's document is made of: the entity, or a row read by a raw query (rows.ts). */
export type TaskStageView = Pick<TaskStage, 'id' | 'status' | 'stage' | 'statusTimestamps'> &
  Timestamps & {
    run: { id: string };
  };

/** What a result's document is made of: the entity, or a row read by a raw query (rows.ts). */
export type TaskResultView = Pick<
  TaskResult,
  | 'id'
  | 'message'
  | 'status'
  | 'statusTimestamps'
  | 'url'
  | 'taskId'
  | 'taskName'
  | 'taskUrl'
  | 'stage'
  | 'isSpeculative'
  | 'workspaceTaskId'
  | 'enforcementLevel'
  | 'outcomesCount'
> &
  Timestamps & { taskStage: { id: string } };

export interface TaskStagePermissions {
  canOverrideTasks: boolean;
}

export function serializeTaskStage(stage: TaskStageView, resultIds: readonly string[], permissions: TaskStagePermissions): Resource {
  return {
    id: stage.id,
    type: 'task-stages',
    attributes: {
      status: stage.status,
      stage: stage.stage,
      'status-timestamps': stage.statusTimestamps,
      'created-at': timestamp(stage.createdAt),
      'updated-at': timestamp(stage.updatedAt),
      permissions: {
        'can-override-policy': false,
        'can-override-tasks': permissions.canOverrideTasks,
        'can-override': permissions.canOverrideTasks,
      },
      actions: { 'is-overridable': stage.status === 'awaiting_override' && permissions.canOverrideTasks },
    },
    relationships: {
      run: toOne('runs', stage.run.id),
      'task-results': toMany('task-results', resultIds),
      'policy-evaluations': toMany('policy-evaluations', []),
    },
    links: selfLink(`/task-stages/${stage.id}`),
  };
}

export function serializeTaskResult(result: TaskResultView): Resource {
  const stageRelationship = toOne('task-stages', result.taskStage.id);
  return {
    id: result.id,
    type: 'task-results',
    attributes: {
      message: result.message ?? null,
      status: result.status,
      'status-timestamps': result.statusTimestamps,
      url: result.url ?? null,
      'created-at': timestamp(result.createdAt),
      'updated-at': timestamp(result.updatedAt),
      'task-id': result.taskId,
      'task-name': result.taskName,
      'task-url': shownTaskUrl(result.taskUrl),
      stage: result.stage,
      'is-speculative': result.isSpeculative,
      'workspace-task-id': result.workspaceTaskId ?? null,
      'workspace-task-enforcement-level': result.enforcementLevel,
      'agent-pool-id': null,
      'task-result-outcomes-count': result.outcomesCount,
    },
    // go-tfe v1 reads `task_stage`, the docs and v2 `task-stage`: emit both.
    relationships: { 'task-stage': stageRelationship, task_stage: stageRelationship },
    links: selfLink(`/task-results/${result.id}`),
  };
}
