import type { DeliveryAttempt, RunTask, TaskResultOutcome, WorkspaceTask } from '@runtasks/shared/db';
import { selfLink, timestamp, toMany, toOne, type Resource, type Timestamps } from '../http/jsonapi.ts';
import { shownTaskUrl } from './task-url.ts';

export interface RunTaskView {
  organizationName: string;
  workspaceTaskIds: readonly string[];
  /** `global-configuration` is present only when the organization is entitled to global run tasks. */
  globalEntitled: boolean;
}

/** What a task's document is made of: the entity, or a row read by a raw query (rows.ts). */
export type RunTaskFields = Pick<
  RunTask,
  'id' | 'name' | 'url' | 'description' | 'category' | 'enabled' | 'globalEnabled' | 'globalStages' | 'globalEnforcementLevel'
> &
  Timestamps;

export function serializeRunTask(task: RunTaskFields, view: RunTaskView): Resource {
  const attributes: Record<string, unknown> = {
    name: task.name,
    url: shownTaskUrl(task.url),
    description: task.description ?? null,
    category: task.category,
    // Write-only: never emitted, whatever is stored (HCP behaviour).
    'hmac-key': null,
    enabled: task.enabled,
    'created-at': timestamp(task.createdAt),
    'updated-at': timestamp(task.updatedAt),
  };
  if (view.globalEntitled) {
    attributes['global-configuration'] = {
      enabled: task.globalEnabled,
      stages: [...task.globalStages],
      'enforcement-level': task.globalEnforcementLevel,
    };
  }
  return {
    id: task.id,
    type: 'tasks',
    attributes,
    relationships: {
      organization: toOne('organizations', view.organizationName),
      'workspace-tasks': toMany('workspace-tasks', view.workspaceTaskIds),
    },
    links: selfLink(`/tasks/${task.id}`),
  };
}

export function serializeWorkspaceTask(association: WorkspaceTask): Resource {
  const stages = [...association.stages];
  return {
    id: association.id,
    type: 'workspace-tasks',
    attributes: {
      'enforcement-level': association.enforcementLevel,
      // Deprecated single stage: go-tfe asserts it mirrors stages[0].
      stage: stages[0] ?? 'post_plan',
      stages,
      'created-at': timestamp(association.createdAt),
      'updated-at': timestamp(association.updatedAt),
    },
    relationships: {
      task: toOne('tasks', association.task.id),
      workspace: toOne('workspaces', association.workspace.id),
    },
    links: selfLink(`/workspaces/${association.workspace.id}/tasks/${association.id}`),
  };
}

export function serializeOutcome(outcome: TaskResultOutcome): Resource {
  return {
    id: outcome.id,
    type: 'task-result-outcomes',
    attributes: {
      'outcome-id': outcome.outcomeId,
      description: outcome.description ?? null,
      body: outcome.body ?? null,
      url: outcome.url ?? null,
      tags: outcome.tags,
      'created-at': timestamp(outcome.createdAt),
    },
    relationships: { 'task-result': toOne('task-results', outcome.taskResult.id) },
    links: selfLink(`/task-result-outcomes/${outcome.id}`),
  };
}

export function serializeDeliveryAttempt(attempt: DeliveryAttempt): Resource {
  return {
    // Its key: its result's id and its ordinal there.
    id: `${attempt.taskResult.id}.${attempt.attempt}`,
    type: 'delivery-attempts',
    attributes: {
      attempt: attempt.attempt,
      'started-at': timestamp(attempt.startedAt),
      'duration-ms': attempt.durationMs,
      'http-status': attempt.httpStatus ?? null,
      'error-kind': attempt.errorKind ?? null,
      'response-excerpt': attempt.responseExcerpt ?? null,
    },
    relationships: { 'task-result': toOne('task-results', attempt.taskResult.id) },
  };
}
