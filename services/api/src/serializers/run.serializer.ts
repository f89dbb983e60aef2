import {
  forceCancelAvailableAt,
  isForceCancelable,
  planStatus,
  runActionSubject,
  runActionTarget,
  type WaitingFor,
} from '@runtasks/shared/domain';
import { actorUsername, parseActor } from '../auth/actor.ts';
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
 * `waiting-for` (not HCP's): what a run waiting in its workspace's queue waits for, null for one that
 * does not wait. The holder's `since` is when it began to hold the workspace; `created-by` names who
 * queued it, as a user id and that user's name.
 */
function waitingForAttribute(waiting: WaitingFor | null): Record<string, unknown> | null {
  if (!waiting) return null;
  const { run, lock } = waiting;
  const actor = parseActor(run?.createdBy);
  return {
    position: waiting.position,
    run: run && {
      id: run.id,
      status: run.status,
      since: run.since,
      'created-by': actor ? run.createdBy : null,
      // A person's name takes a lookup this serializer does not make: their id says who it is.
      'created-by-username': actor && actor.kind !== 'user' ? actorUsername(actor) : null,
      message: run.message,
    },
    lock: lock && { type: lock.kind, id: lock.id, reason: lock.reason },
  };
}

/**
 * `permissions` are the caller's (left out in included resources); `commentIds`, the run's comments
 * where the run's own document is shown (left out, not shown empty, where they were not read); likewise
 * `waiting`, what it waits for in its workspace's queue (`waiting-for`).
 */
export function serializeRun(
  run: RunView,
  taskStageIds: readonly string[],
  permissions?: Permissions,
  commentIds?: readonly string[],
  waiting?: WaitingFor | null,
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
      ...(waiting !== undefined && { 'waiting-for': waitingForAttribute(waiting) }),
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
