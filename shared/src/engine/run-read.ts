import type { EntityManager } from '@mikro-orm/postgresql';
import { nativePool, prepared } from '../db/prepared.ts';
import { ENDED_RUNS, stageSnapshots, type AdvanceResult, type AdvanceStage } from '../domain/advance-decision.ts';
import { DEFAULT_LOCAL_TIMEOUTS, reportOverdue, type LocalTimeouts } from '../domain/executions.ts';
import { waitsInQueue, type QueueState } from '../domain/run-queue.ts';
import { nextRunStep, type RunSnapshot } from '../domain/lifecycle.ts';
import type { EnforcementLevel, ExecutionMode, RunStage, RunStatus, TaskResultStatus, TaskStageStatus } from '../domain/statuses.ts';
import { DISPATCH_RUN_COLUMNS } from './task-payload.ts';

// How the engine reads a run with its stages and results: the advance's read of one run, the sweeper's of many.

export interface RunRow {
  id: string;
  status: RunStatus;
  plan_only: boolean;
  auto_apply: boolean;
  overrides_enabled: boolean;
  execution_mode: ExecutionMode;
  has_changes: boolean;
  /** The run's place in its workspace's queue (run-queue.ts): a `queued` pending run waits, and starts nothing. */
  queue_state: QueueState | null;
  run_timestamps: Record<string, string>;
  /** The database's clock as it read the run: a local run's wait for its report is timed by it. */
  db_now: Date;
}
export interface StageRow {
  id: string;
  stage: RunStage;
  status: TaskStageStatus;
  status_timestamps: Record<string, string>;
}
export interface ResultRow {
  id: string;
  task_stage_id: string;
  status: TaskResultStatus;
  enforcement_level: EnforcementLevel;
  /** No access token yet: planned by an earlier version, which issued tokens as results started; so does this, for such a result. */
  tokenless: boolean;
}

/** The run as the lifecycle rule sees it, from any read of it (the advance's, or the sweeper's snapshot). */
export function runSnapshot(row: Omit<RunRow, 'id'>, localTimeouts: LocalTimeouts): RunSnapshot {
  const wait = { status: row.status, statusTimestamps: row.run_timestamps, executionMode: row.execution_mode };
  return {
    status: row.status,
    planOnly: row.plan_only,
    autoApply: row.auto_apply,
    overridesEnabled: row.overrides_enabled,
    executionMode: row.execution_mode,
    hasChanges: row.has_changes,
    reportOverdue: reportOverdue(wait, new Date(row.db_now), localTimeouts),
  };
}

/** The run's columns every read the lifecycle decides from names (alias `r`). */
const RUN_RULE_COLUMNS = `r.execution_mode, r.has_changes, r.queue_state, r.status_timestamps as run_timestamps, now() as db_now`;

/** The columns of a stage joined with one of its results (or none), as every read of a run's stages names them. */
export const STAGE_RESULT_COLUMNS = `ts.id as stage_id, ts.stage, ts.status as stage_status, ts.status_timestamps, tr.id as result_id,
          tr.status as result_status, tr.enforcement_level`;

/**
 * The run with its stages and results, as one snapshot (one statement, no lock): what the advance
 * decides from. Its write applies only where the run's version is still the one read here.
 */
export const READ_RUN_WITH_STAGES = prepared(
  'run-advance-read',
  `select r.id, r.status, r.version, r.auto_apply, r.stages_planned, o.task_overrides_enabled as overrides_enabled, ${RUN_RULE_COLUMNS},
          ${DISPATCH_RUN_COLUMNS},
          ${STAGE_RESULT_COLUMNS}, tr.callback_token_encrypted is null as tokenless
     from runs r join organizations o on o.id = r.organization_id join workspaces w on w.id = r.workspace_id
     left join task_stages ts on ts.run_id = r.id left join task_results tr on tr.task_stage_id = ts.id
    where r.id = $1`,
);

/** A row of a stage joined with one of its results (or none); no stage at all where the run has none. */
export interface StageResultRow {
  stage_id: string | null;
  stage: RunStage;
  stage_status: TaskStageStatus;
  status_timestamps: Record<string, string>;
  result_id: string | null;
  result_status: TaskResultStatus | null;
  enforcement_level: EnforcementLevel | null;
  tokenless?: boolean | null;
}

export function groupStages(rows: readonly StageResultRow[]): { stages: StageRow[]; results: ResultRow[] } {
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

export const advanceStage = (stage: StageRow): AdvanceStage => ({
  id: stage.id,
  stage: stage.stage,
  status: stage.status,
  statusTimestamps: stage.status_timestamps,
});
export const advanceResult = (result: ResultRow): AdvanceResult => ({
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
function waits(rows: readonly SnapshotRow[], localTimeouts: LocalTimeouts): boolean {
  const [first] = rows;
  if (!first) return false;
  if (waitsInQueue({ status: first.run_status, queueState: first.queue_state })) return true;
  const { stages, results } = groupStages(rows);
  if (ENDED_RUNS.has(first.run_status) || (first.run_status === 'pending' && stages.length === 0)) return false;
  const snapshot = runSnapshot({ ...first, status: first.run_status }, localTimeouts);
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
  localTimeouts: LocalTimeouts = DEFAULT_LOCAL_TIMEOUTS,
): Promise<string[]> {
  if (runIds.length === 0) return [];
  const byRun = new Map<string, SnapshotRow[]>();
  const { rows } = await (await nativePool(em)).query<SnapshotRow>(RUNS_SNAPSHOT_SQL, [runIds]);
  for (const row of rows) {
    const ofRun = byRun.get(row.run_id);
    if (ofRun) ofRun.push(row);
    else byRun.set(row.run_id, [row]);
  }
  return runIds.filter((runId) => byRun.has(runId) && !waits(byRun.get(runId) ?? [], localTimeouts));
}
