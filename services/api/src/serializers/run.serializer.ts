import { runActionTarget, type Run } from '@runtasks/shared';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toMany, toOne, type Resource } from '../http/jsonapi.ts';

/** What a run's document shows: the entity, or a run just created without the unit of work. */
export type RunView = Pick<
  Run,
  | 'id'
  | 'status'
  | 'statusTimestamps'
  | 'message'
  | 'isDestroy'
  | 'planOnly'
  | 'autoApply'
  | 'hasTaskWarnings'
  | 'createdAt'
  | 'planId'
  | 'configurationVersionId'
> & { workspace: { id: string } };

/** `permissions` are the caller's (left out in included resources). */
export function serializeRun(run: RunView, taskStageIds: readonly string[], permissions?: Permissions): Resource {
  const subject = { status: run.status, planOnly: run.planOnly };
  return {
    id: run.id,
    type: 'runs',
    attributes: {
      status: run.status,
      'status-timestamps': run.statusTimestamps,
      message: run.message,
      source: 'tfe-api',
      'is-destroy': run.isDestroy,
      'plan-only': run.planOnly,
      'auto-apply': run.autoApply,
      'has-changes': false,
      'has-task-warnings': run.hasTaskWarnings,
      'created-at': timestamp(run.createdAt),
      actions: {
        'is-cancelable': runActionTarget('cancel', subject) !== null,
        'is-confirmable': runActionTarget('apply', subject) !== null,
        'is-discardable': runActionTarget('discard', subject) !== null,
        'is-force-cancelable': false,
      },
      ...(permissions && { permissions }),
    },
    relationships: {
      workspace: toOne('workspaces', run.workspace.id),
      plan: toOne('plans', run.planId),
      'configuration-version': toOne('configuration-versions', run.configurationVersionId),
      'task-stages': toMany('task-stages', taskStageIds),
    },
    links: selfLink(`/runs/${run.id}`),
  };
}
