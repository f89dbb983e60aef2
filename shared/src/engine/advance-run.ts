import type { EntityManager } from '@mikro-orm/postgresql';
import type { Pool } from 'pg';
import { inTransaction, nativePool, runPrepared, StatementShapes } from '../db/prepared.ts';
import { decideAdvance } from '../domain/advance-decision.ts';
import { DEFAULT_LOCAL_TIMEOUTS, type LocalTimeouts } from '../domain/executions.ts';
import { waitsInQueue } from '../domain/run-queue.ts';
import type { RunStage, RunStatus } from '../domain/statuses.ts';
import type { CallbackToken, CallbackTokenIssuer } from '../security/secrets.ts';
import { advanceWrite, type AdvanceWriteSettings } from './advance-write.ts';
import type { RunExecutor } from './executor.ts';
import { insertPlannedStages } from './plan-run.ts';
import { admitAfterRelease } from './workspace-queue.ts';
import {
  advanceResult,
  advanceStage,
  groupStages,
  READ_RUN_WITH_STAGES,
  runSnapshot,
  type ResultRow,
  type RunRow,
  type StageResultRow,
  type StageRow,
} from './run-read.ts';
import { dispatchRunFields, type DispatchResultFields, type DispatchRow, type DispatchRunFields } from './task-payload.ts';

export interface AdvanceSettings extends AdvanceWriteSettings {
  issueToken: CallbackTokenIssuer;
  /** How long a local run waits for its pipeline's plan or apply (LOCAL_PLAN_TIMEOUT_SECONDS, LOCAL_APPLY_TIMEOUT_SECONDS; default their defaults). */
  localTimeouts?: LocalTimeouts;
}

/**
 * A result the advance started, with its first delivery attempt already claimed (leased, with its
 * access token): the caller delivers it after commit. Its stage's deadline is scheduled once for all.
 */
export interface StartedResult {
  stageId: string;
  row: DispatchRow;
  /** The token issued as it started, if it had none (see ResultRow.tokenless); otherwise its row's. */
  issued: CallbackToken | undefined;
}

/** The advance's one write: its text depends on what moved (a handful of shapes), each prepared. */
const ADVANCE_WRITES = new StatementShapes('advance-write');

type ReadRow = RunRow & DispatchRunFields & StageResultRow & { version: number; stages_planned: boolean };

/** A row of the advance's write where it starts results: one of them, or (where none started after all) nulls. */
type StartedRow = (DispatchResultFields & { task_stage_id: string }) | { task_stage_id: null };

/**
 * How many times an advance reads the run again after its write found the run moved since its read (by
 * another advance of it, or an action). Each retry follows a write that someone else committed, so a
 * run that keeps moving under this one is rare; past this the job fails and is retried later.
 */
const MAX_ATTEMPTS = 5;

/**
 * The planning of a run created without it (by an earlier version), under the run's lock, while it is
 * still pending, once: the flag it sets keeps a later advance from planning it again with whatever
 * tasks are attached by then.
 */
async function repairPlanning(pool: Pool, runId: string, issueToken: CallbackTokenIssuer): Promise<void> {
  await inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ status: RunStatus; stages_planned: boolean }>(
      'select status, stages_planned from runs where id = $1 for update',
      [runId],
    );
    if (rows[0]?.status !== 'pending' || rows[0].stages_planned) return;
    await insertPlannedStages(client, runId, issueToken);
    await client.query('update runs set stages_planned = true where id = $1', [runId]);
  });
}

/**
 * Moves a run as far as it can go now. It reads the run with its stages and results in one statement,
 * decides every step with the pure `nextRunStep`, and writes them all in one statement that applies
 * only if the run's version is still the one it read: a concurrent advance of the same run (a
 * duplicated job, a sweeper re-drive) or an action that committed meanwhile makes it write nothing and
 * read again, so each step is taken once. Two round trips and one commit, with no lock held between
 * them; a run that waits (most wake-ups of an idle run) costs the read alone.
 *
 * What changes a run's stages or results without its version (a callback's verdict, an override) may be
 * missing from the read, as it may when it commits just after it: each of those wakes the run again once
 * it has committed.
 *
 * `db` runs generic plans by index (`genericIndexPool`); `em`'s pool repairs a run planned without stages.
 * Returns the results it started, with their first attempts claimed, for the caller to deliver (and their
 * stages, whose deadlines the caller schedules).
 */
export async function advanceRun(
  em: EntityManager,
  db: Pool,
  runId: string,
  executor: RunExecutor,
  settings: AdvanceSettings,
): Promise<StartedResult[]> {
  let repaired = false;
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
    const rows = await runPrepared<ReadRow>(db, READ_RUN_WITH_STAGES, [runId]);
    const run = rows[0];
    if (!run) return [];
    if (waitsInQueue({ status: run.status, queueState: run.queue_state })) return [];
    const { stages, results } = groupStages(rows);
    if (run.status === 'pending' && stages.length === 0 && !run.stages_planned && !repaired) {
      // Planned when the run was created (with no stages where its workspace had no tasks then); this is
      // the repair for a run that an earlier version created unplanned.
      await repairPlanning(await nativePool(em), runId, settings.issueToken);
      repaired = true;
      continue;
    }
    const written = await decideAndWrite(db, run, stages, results, executor, settings);
    if (written) return written.started;
  }
  throw new Error(`run ${runId} moved under ${MAX_ATTEMPTS} advances in a row; the job is retried`);
}

/**
 * The steps the run can take now (decideAdvance, pure), from what `advanceRun` read, with the
 * executor's steps taken, written at once. Returns what was started, or undefined where the run's
 * version moved since the read (nothing was written).
 */
async function decideAndWrite(
  db: Pool,
  run: ReadRow,
  stages: StageRow[],
  results: ResultRow[],
  executor: RunExecutor,
  settings: AdvanceSettings,
): Promise<{ started: StartedResult[] } | undefined> {
  const localTimeouts = settings.localTimeouts ?? DEFAULT_LOCAL_TIMEOUTS;
  const decision = decideAdvance(runSnapshot(run, localTimeouts), stages.map(advanceStage), results.map(advanceResult), localTimeouts);
  for (const execution of decision.executions) await executor[execution](run.id);
  if (decision.runTransitions.length === 0 && decision.unstartedStageIds.length === 0) return { started: [] };
  const startedRows = results.filter((result) => decision.startedResultIds.includes(result.id));
  // Results planned without a token (by an earlier version) get theirs as they start.
  const issued = new Map(startedRows.filter((result) => result.tokenless).map((result) => [result.id, settings.issueToken(result.id)]));
  const write = advanceWrite(
    { id: run.id, version: run.version },
    decision,
    startedRows.map((result) => ({ id: result.id, token: issued.get(result.id) })),
    settings,
  );
  // Where the run's version held, at least one row (one per started result, else one of nulls); else none.
  const rows = await ADVANCE_WRITES.run<StartedRow>(db, write.text, write.values);
  if (rows.length === 0) return undefined;
  // Where this write released the workspace, the next run starts (best effort: the sweeper repairs a failed admission).
  await admitAfterRelease(db, { workspaceId: run.workspace_id, queueState: run.queue_state, from: run.status, to: decision.runStatus });
  if (startedRows.length === 0) return { started: [] };
  const runFields = dispatchRunFields(run);
  const stageNames = new Map(stages.map((stage) => [stage.id, stage.stage]));
  const started: StartedResult[] = [];
  for (const row of rows) {
    // The row of nulls where none started; every other is one of startedRows, in one of this run's stages.
    if (row.task_stage_id === null) continue;
    const { task_stage_id: stageId, ...result } = row;
    started.push({ stageId, row: { ...result, ...runFields, stage: stageNames.get(stageId) as RunStage }, issued: issued.get(result.id) });
  }
  return { started };
}
