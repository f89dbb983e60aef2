import type { EntityManager } from '@mikro-orm/postgresql';
import { nextRunStep, type RunSnapshot } from '../domain/lifecycle.ts';
import { decideAdvance, ENDED_RUNS, stageSnapshots, type AdvanceResult, type AdvanceStage } from '../domain/advance-decision.ts';
import { inTransaction, nativePool, prepared, runPrepared, StatementShapes } from '../db/prepared.ts';
import { insertPlannedStages } from './plan-run.ts';
import { advanceWrite, type AdvanceWriteSettings } from './advance-write.ts';
import { reportOverdue } from '../domain/executions.ts';
import { type CallbackToken, type CallbackTokenIssuer } from '../security/secrets.ts';
import {
  type EnforcementLevel,
  type ExecutionMode,
  type RunStage,
  type RunStatus,
  type TaskResultStatus,
  type TaskStageStatus,
} from '../domain/statuses.ts';
import type { Pool } from 'pg';
import type { RunExecutor } from './executor.ts';
import {
  DISPATCH_RUN_COLUMNS,
  dispatchRunFields,
  type DispatchResultFields,
  type DispatchRow,
  type DispatchRunFields,
} from './task-payload.ts';

interface RunRow {
  id: string;
  status: RunStatus;
  plan_only: boolean;
  auto_apply: boolean;
  overrides_enabled: boolean;
  execution_mode: ExecutionMode;
  has_changes: boolean;
  run_timestamps: Record<string, string>;
  /** The database's clock as it read the run: a local run's wait for its report is timed by it. */
  db_now: Date;
}
interface StageRow {
  id: string;
  stage: RunStage;
  status: TaskStageStatus;
  status_timestamps: Record<string, string>;
}
interface ResultRow {
  id: string;
  task_stage_id: string;
  status: TaskResultStatus;
  enforcement_level: EnforcementLevel;
  /** No access token yet: planned by an earlier version, which issued tokens as results started; so does this, for such a result. */
  tokenless: boolean;
}

export interface AdvanceSettings extends AdvanceWriteSettings {
  issueToken: CallbackTokenIssuer;
  /** How long a local run waits for its pipeline's plan or apply (LOCAL_EXECUTION_TIMEOUT_SECONDS; default its default). */
  localExecutionTimeoutSeconds?: number;
}

const DEFAULT_LOCAL_TIMEOUT_SECONDS = 3600;

/** The run as the lifecycle rule sees it, from any read of it (the advance's, or the sweeper's snapshot). */
function runSnapshot(row: Omit<RunRow, 'id'>, localTimeoutSeconds: number): RunSnapshot {
  const wait = { status: row.status, statusTimestamps: row.run_timestamps, executionMode: row.execution_mode };
  return {
    status: row.status,
    planOnly: row.plan_only,
    autoApply: row.auto_apply,
    overridesEnabled: row.overrides_enabled,
    executionMode: row.execution_mode,
    hasChanges: row.has_changes,
    reportOverdue: reportOverdue(wait, new Date(row.db_now), localTimeoutSeconds),
  };
}

/** The run's columns every read the lifecycle decides from names (alias `r`). */
const RUN_RULE_COLUMNS = `r.execution_mode, r.has_changes, r.status_timestamps as run_timestamps, now() as db_now`;

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

/** The columns of a stage joined with one of its results (or none), as every read of a run's stages names them. */
const STAGE_RESULT_COLUMNS = `ts.id as stage_id, ts.stage, ts.status as stage_status, ts.status_timestamps, tr.id as result_id,
          tr.status as result_status, tr.enforcement_level`;

/**
 * The run with its stages and results, as one snapshot (one statement, no lock): what the advance
 * decides from. Its write applies only where the run's version is still the one read here.
 */
const READ_RUN_WITH_STAGES = prepared(
  'run-advance-read',
  `select r.id, r.status, r.version, r.auto_apply, r.stages_planned, o.task_overrides_enabled as overrides_enabled, ${RUN_RULE_COLUMNS},
          ${DISPATCH_RUN_COLUMNS},
          ${STAGE_RESULT_COLUMNS}, tr.callback_token_encrypted is null as tokenless
     from runs r join organizations o on o.id = r.organization_id join workspaces w on w.id = r.workspace_id
     left join task_stages ts on ts.run_id = r.id left join task_results tr on tr.task_stage_id = ts.id
    where r.id = $1`,
);

/** A row of a stage joined with one of its results (or none); no stage at all where the run has none. */
interface StageResultRow {
  stage_id: string | null;
  stage: RunStage;
  stage_status: TaskStageStatus;
  status_timestamps: Record<string, string>;
  result_id: string | null;
  result_status: TaskResultStatus | null;
  enforcement_level: EnforcementLevel | null;
  tokenless?: boolean | null;
}

function groupStages(rows: readonly StageResultRow[]): { stages: StageRow[]; results: ResultRow[] } {
  const stages = new Map<string, StageRow>();
  const results: ResultRow[] = [];
  for (const row of rows) {
    if (row.stage_id === null) continue;
    if (!stages.has(row.stage_id))
      stages.set(row.stage_id, { id: row.stage_id, stage: row.stage, status: row.stage_status, status_timestamps: row.status_timestamps });
    if (row.result_id && row.result_status && row.enforcement_level) {
      results.push({
        id: row.result_id,
        task_stage_id: row.stage_id,
        status: row.result_status,
        enforcement_level: row.enforcement_level,
        tokenless: row.tokenless === true,
      });
    }
  }
  return { stages: [...stages.values()], results };
}

const advanceStage = (stage: StageRow): AdvanceStage => ({
  id: stage.id,
  stage: stage.stage,
  status: stage.status,
  statusTimestamps: stage.status_timestamps,
});
const advanceResult = (result: ResultRow): AdvanceResult => ({
  id: result.id,
  stageId: result.task_stage_id,
  status: result.status,
  enforcementLevel: result.enforcement_level,
});

type SnapshotRow = Omit<RunRow, 'id' | 'status'> & StageResultRow & { run_id: string; run_status: RunStatus };

const SNAPSHOT_COLUMNS = `r.id as run_id, r.status as run_status, r.plan_only, r.auto_apply, o.task_overrides_enabled as overrides_enabled,
          ${RUN_RULE_COLUMNS}, ${STAGE_RESULT_COLUMNS}`;
const SNAPSHOT_FROM = `runs r join organizations o on o.id = r.organization_id
     left join task_stages ts on ts.run_id = r.id
     left join task_results tr on tr.task_stage_id = ts.id`;

/**
 * Many runs' snapshots: not prepared, so that each is planned for its own list (a generic plan, which
 * cannot know how many runs it reads, may read every stage and result instead of probing their indexes).
 */
export const RUNS_SNAPSHOT_SQL = `select ${SNAPSHOT_COLUMNS} from ${SNAPSHOT_FROM} where r.id = any($1::text[])`;

/**
 * Whether a run, as one snapshot's rows show it (at least one), waits: for a task server's verdict, a
 * deadline, a person's decision. Runs to repair or that ended are not judged waiting: an advance looks
 * at them (it plans the one, and ends the other's unstarted stages).
 */
function waits(rows: readonly SnapshotRow[], localTimeoutSeconds: number): boolean {
  const [first] = rows;
  if (!first) return false;
  const { stages, results } = groupStages(rows);
  if (ENDED_RUNS.has(first.run_status) || (first.run_status === 'pending' && stages.length === 0)) return false;
  const snapshot = runSnapshot({ ...first, status: first.run_status }, localTimeoutSeconds);
  return nextRunStep(snapshot, stageSnapshots(stages.map(advanceStage), results.map(advanceResult))).kind === 'wait';
}

/**
 * Of these runs, those that have something to do now: the sweeper's look at idle runs, by the same
 * rule as an advance's read, for many runs in one statement (a run gone meanwhile has none).
 * A run waiting for a slow task server or for a person needs no wake-up, however long it waits.
 */
export async function runsThatMayMove(
  em: EntityManager,
  runIds: readonly string[],
  localTimeoutSeconds = DEFAULT_LOCAL_TIMEOUT_SECONDS,
): Promise<string[]> {
  if (runIds.length === 0) return [];
  const byRun = new Map<string, SnapshotRow[]>();
  const { rows } = await (await nativePool(em)).query<SnapshotRow>(RUNS_SNAPSHOT_SQL, [runIds]);
  for (const row of rows) {
    const ofRun = byRun.get(row.run_id);
    if (ofRun) ofRun.push(row);
    else byRun.set(row.run_id, [row]);
  }
  return runIds.filter((runId) => byRun.has(runId) && !waits(byRun.get(runId) ?? [], localTimeoutSeconds));
}

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
  const localTimeoutSeconds = settings.localExecutionTimeoutSeconds ?? DEFAULT_LOCAL_TIMEOUT_SECONDS;
  const decision = decideAdvance(
    runSnapshot(run, localTimeoutSeconds),
    stages.map(advanceStage),
    results.map(advanceResult),
    localTimeoutSeconds,
  );
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
