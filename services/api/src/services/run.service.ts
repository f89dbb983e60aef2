import type { EntityManager } from '@mikro-orm/postgresql';
import { nativePool, type Queryable, type Run } from '@runtasks/shared/db';
import type { RunAction } from '@runtasks/shared/domain';
import type { RunCreatedJob } from '@runtasks/shared/queue';
import type { CallbackTokenIssuer } from '@runtasks/shared/security';
import {
  applyRunAction as applyAction,
  createRun as createRunRows,
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

/** Applies a run action through the engine (applyRunAction there): 409 where the run cannot take it. */
export async function applyRunAction(em: EntityManager, run: Run, action: RunAction, actorTokenId: string | null = null): Promise<void> {
  const subject = { ...run, workspaceId: run.workspace.id, queueState: run.queueState ?? null };
  await applyAction(await nativePool(em), subject, action, actorTokenId);
}
