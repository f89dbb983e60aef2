import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import { nativePool, type Queryable, type Run } from '@runtasks/shared/db';
import {
  waitingFor,
  waitsInQueue,
  type ActedBy,
  type QueueState,
  type RunAction,
  type RunStatus,
  type WaitingFor,
} from '@runtasks/shared/domain';
import type { RunCreatedJob } from '@runtasks/shared/queue';
import type { CallbackTokenIssuer } from '@runtasks/shared/security';
import {
  applyRunAction as applyAction,
  createRun as createRunRows,
  queueViews,
  recordRunEvent,
  type CreateRunInput,
  type ResultDeadlines,
  type RunPlace,
  type TaskRow,
} from '@runtasks/shared/engine';
import type { RunView } from '../serializers/run.serializer.ts';

export { createRunIn, type CreateRunInput, type RunPlace } from '@runtasks/shared/engine';

/** Creates a run through the engine (createRun there) and returns it as the API shows it, with its stages' ids and its job. */
export async function createRun(
  db: Queryable,
  place: RunPlace,
  input: CreateRunInput,
  tasks: readonly TaskRow[],
  issueToken: CallbackTokenIssuer,
  deadlines: ResultDeadlines,
): Promise<{ run: RunView; stageIds: string[]; job: RunCreatedJob }> {
  const created = await createRunRows(db, place, input, tasks, issueToken, deadlines);
  const run: RunView = {
    id: created.id,
    status: created.status,
    statusTimestamps: created.statusTimestamps,
    message: input.message,
    isDestroy: input.isDestroy,
    planOnly: input.planOnly,
    autoApply: input.autoApply,
    hasTaskWarnings: false,
    createdAt: created.createdAt,
    workspace: { id: place.workspaceId },
    planId: created.planId,
    applyId: created.applyId,
    executionMode: place.executionMode,
    hasChanges: created.summary.hasChanges,
    configurationVersionId: input.configurationVersionId,
    options: input.options ?? {},
    createdBy: input.createdBy,
    confirmedBy: null,
  };
  return { run, stageIds: created.stageIds, job: created.job };
}

/** Applies a run action through the engine (applyRunAction there, which records who did it): 409 where the run cannot take it. */
export async function applyRunAction(em: EntityManager, run: Run, action: RunAction, by: ActedBy): Promise<void> {
  const subject = { ...run, workspaceId: run.workspace.id, queueState: run.queueState ?? null };
  await applyAction(await nativePool(em), subject, action, by);
}

/** Records a force-cancel (the engine's run event, with its comment). */
export async function recordForceCancel(em: EntityManager, runId: string, by: ActedBy): Promise<void> {
  await recordRunEvent(await nativePool(em), runId, { action: 'force_canceled', ...by });
}

/** What `waitingForRuns` needs of a run. */
export interface QueuedRunRef {
  id: string;
  status: RunStatus;
  queueState?: QueueState | null;
  workspace: { id: string };
}

/**
 * What each of these runs waits for in its workspace's queue (null: it does not wait), read in one
 * statement for the workspaces where one waits, and none where no run does.
 */
export async function waitingForRuns(pool: Pool, runs: readonly QueuedRunRef[]): Promise<Map<string, WaitingFor | null>> {
  const waiting = runs.filter((run) => waitsInQueue({ status: run.status, queueState: run.queueState ?? null }));
  const views = await queueViews(pool, [...new Set(waiting.map((run) => run.workspace.id))]);
  return new Map(
    runs.map((run) => {
      const view = views.get(run.workspace.id);
      return [run.id, view ? waitingFor(run.id, view) : null];
    }),
  );
}
