import { forceCancelAvailableAt, isForceCancelable, planStatus, runActionSubject, runActionTarget } from '@runtasks/shared/domain';
import { type Run } from '@runtasks/shared/db';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toMany, toOne, type Resource } from '../http/jsonapi.ts';
import { runActorRelationships, runOptionAttributes } from './run-attributes.serializer.ts';

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
  | 'applyId'
  | 'executionMode'
  | 'hasChanges'
  | 'configurationVersionId'
  | 'options'
  | 'createdBy'
  | 'confirmedBy'
> & { workspace: { id: string } };

/**
 * `permissions` are the caller's (left out in included resources); `commentIds`, the run's comments
 * where the run's own document is shown (left out, not shown empty, where they were not read).
 */
export function serializeRun(
  run: RunView,
  taskStageIds: readonly string[],
  permissions?: Permissions,
  commentIds?: readonly string[],
): Resource {
  const subject = runActionSubject(run);
  return {
    id: run.id,
    type: 'runs',
    attributes: {
      status: run.status,
      'status-timestamps': run.statusTimestamps,
      message: run.message,
      'is-destroy': run.isDestroy,
      'plan-only': run.planOnly,
      'auto-apply': run.autoApply,
      // The plan's, once it is finished (HCP shows false until then).
      'has-changes': run.hasChanges && planStatus(run) === 'finished',
      'has-task-warnings': run.hasTaskWarnings,
      'created-at': timestamp(run.createdAt),
      // A cool-off after a cancel (run-queue.ts): null for a run never canceled.
      'force-cancel-available-at': forceCancelAvailableAt(run.statusTimestamps),
      actions: {
        'is-cancelable': runActionTarget('cancel', subject) !== null,
        'is-confirmable': runActionTarget('apply', subject) !== null,
        'is-discardable': runActionTarget('discard', subject) !== null,
        'is-force-cancelable': isForceCancelable(run),
      },
      ...runOptionAttributes(run),
      ...(permissions && { permissions }),
    },
    relationships: {
      workspace: toOne('workspaces', run.workspace.id),
      plan: toOne('plans', run.planId),
      apply: toOne('applies', run.applyId),
      'configuration-version': toOne('configuration-versions', run.configurationVersionId),
      'task-stages': toMany('task-stages', taskStageIds),
      ...(commentIds && { comments: toMany('comments', commentIds) }),
      ...runActorRelationships(run),
    },
    links: selfLink(`/runs/${run.id}`),
  };
}
