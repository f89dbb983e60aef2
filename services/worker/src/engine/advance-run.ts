import type { EntityManager } from '@mikro-orm/postgresql';
import {
  DB_NOW_ISO,
  evaluateStage,
  clientRunner,
  inTransaction,
  insertPlannedStages,
  nativePool,
  prepared,
  runPrepared,
  nextRunStep,
  numbered,
  StatementShapes,
  statusTimestampKey,
  type CallbackToken,
  type CallbackTokenIssuer,
  type EnforcementLevel,
  type Queryable,
  type ResultDeadlines,
  type RunSnapshot,
  type RunStage,
  type RunStatus,
  type RunStep,
  type StageSnapshot,
  type TaskResultStatus,
  type TaskStageStatus,
} from '@runtasks/shared';
import type { Pool, PoolClient } from 'pg';
import type { RunExecutor } from './executor.ts';
import {
  DISPATCH_RESULT_COLUMNS,
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

export interface AdvanceSettings extends ResultDeadlines {
  /** How long a started result's first delivery attempt is leased to the worker that started it. */
  attemptLeaseSeconds: number;
  issueToken: CallbackTokenIssuer;
}

/**
 * `<status>-at` timestamps to add: each on the database clock (now(), the transaction's start, as every
 * update of one transaction sets it) and only where absent (`new || existing`: the existing value wins).
 */
function timestampsSql(keys: readonly string[]): string {
  return `jsonb_build_object(${keys.map(() => `?::text, ${DB_NOW_ISO}`).join(', ')}) || status_timestamps`;
}

const MAX_STEPS = 32;

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

/** A run's stages and their results in one query. */
const STAGES_OF_RUN = prepared(
  'run-stages',
  `select ${STAGE_RESULT_COLUMNS}, tr.callback_token_encrypted is null as tokenless
     from task_stages ts left join task_results tr on tr.task_stage_id = ts.id where ts.run_id = $1`,
);

/**
 * The run, locked (workers advancing one run take turns), with its stages and results: one round trip.
 * The run's columns are its locked (newest) version; the workspace's and organization's names, which
 * the payloads of the results it starts need, are as this statement found them, so a rename committed
 * while it waited for the lock shows from the next stage. So are the stages and results: read as the
 * statement began, before any wait for the lock. `seen_version` is the run's version as of then too;
 * where it differs from the locked version, an advance (or an action) committed meanwhile and the stages
 * are read again. Where it does not, what others changed meanwhile without the run's lock (a callback's
 * result, an override's stage) may be missing, as it may be when it commits just after a read under the
 * lock: each of those wakes the run again once it has committed.
 */
const LOCK_RUN_WITH_STAGES = prepared(
  'run-lock-stages',
  `with run as (
     select r.id, r.status, r.version, r.auto_apply, o.task_overrides_enabled as overrides_enabled, ${DISPATCH_RUN_COLUMNS}
       from runs r join organizations o on o.id = r.organization_id join workspaces w on w.id = r.workspace_id
      where r.id = $1 for update of r)
   select run.*, (select version from runs where id = $1) as seen_version, ${STAGE_RESULT_COLUMNS},
          tr.callback_token_encrypted is null as tokenless
     from run left join task_stages ts on ts.run_id = run.id left join task_results tr on tr.task_stage_id = ts.id`,
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

async function readStages(client: Queryable, runId: string): Promise<{ stages: StageRow[]; results: ResultRow[] }> {
  return groupStages(await runPrepared<StageResultRow>(client, STAGES_OF_RUN, [runId]));
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

/** Runs that will not move again on their own (`applied` may still go on to post_apply). */
const ENDED: ReadonlySet<RunStatus> = new Set(['errored', 'planned_and_finished', 'post_apply_completed', 'canceled', 'discarded']);

function snapshotsOf(stages: readonly StageRow[], results: readonly ResultRow[]): StageSnapshot[] {
  return stages.map((stage) => ({
    stage: stage.stage,
    status: stage.status,
    overridden: stage.status === 'running' && 'awaiting-override-at' in stage.status_timestamps,
    evaluation: evaluateStage(
      stage.stage,
      results
        .filter((result) => result.task_stage_id === stage.id)
        .map((result) => ({ status: result.status, enforcementLevel: result.enforcement_level })),
    ),
  }));
}

type SnapshotRow = Omit<RunRow, 'id' | 'status'> & StageResultRow & { run_id: string; run_status: RunStatus };

const SNAPSHOT_COLUMNS = `r.id as run_id, r.status as run_status, r.plan_only, r.auto_apply, o.task_overrides_enabled as overrides_enabled,
          ${STAGE_RESULT_COLUMNS}`;
const SNAPSHOT_FROM = `runs r join organizations o on o.id = r.organization_id
     left join task_stages ts on ts.run_id = r.id
     left join task_results tr on tr.task_stage_id = ts.id`;

const RUN_SNAPSHOT = prepared('run-snapshot', `select ${SNAPSHOT_COLUMNS} from ${SNAPSHOT_FROM} where r.id = $1`);

/**
 * Many runs' snapshots: not prepared, so that each is planned for its own list (a generic plan, which
 * cannot know how many runs it reads, may read every stage and result instead of probing their indexes).
 */
export const RUNS_SNAPSHOT_SQL = `select ${SNAPSHOT_COLUMNS} from ${SNAPSHOT_FROM} where r.id = any($1::text[])`;

/**
 * Whether a run, as one snapshot's rows show it (at least one), waits: for a task server's verdict, a
 * deadline, a person's decision. Runs to repair or that ended are not judged waiting: the locked path
 * looks at them.
 */
function waits(rows: readonly SnapshotRow[]): boolean {
  const [first] = rows;
  if (!first) return false;
  const { stages, results } = groupStages(rows);
  if (ENDED.has(first.run_status) || (first.run_status === 'pending' && stages.length === 0)) return false;
  const snapshot: RunSnapshot = {
    status: first.run_status,
    planOnly: first.plan_only,
    autoApply: first.auto_apply,
    overridesEnabled: first.overrides_enabled,
  };
  return nextRunStep(snapshot, snapshotsOf(stages, results)).kind === 'wait';
}

/**
 * Whether the run has nothing to do now, judged from one consistent snapshot (one statement) without
 * a lock or a transaction. Many wake-ups are of this kind (a deadline moved on by progress, a failed
 * delivery's). Waiting is safe to conclude lock-free: whatever later lets the run move (a callback, a
 * deadline, an override, an action) commits first and then wakes it again.
 */
async function nothingToDo(em: EntityManager, runId: string): Promise<boolean> {
  const rows = await runPrepared<SnapshotRow>(await nativePool(em), RUN_SNAPSHOT, [runId]);
  return rows.length === 0 || waits(rows);
}

/**
 * Of these runs, those that have something to do now: the sweeper's look at idle runs, by the same
 * rule and snapshot as `nothingToDo`, for many runs in one statement (a run gone meanwhile has none).
 * A run waiting for a slow task server or for a person needs no wake-up, however long it waits.
 */
export async function runsThatMayMove(em: EntityManager, runIds: readonly string[]): Promise<string[]> {
  if (runIds.length === 0) return [];
  const byRun = new Map<string, SnapshotRow[]>();
  const { rows } = await (await nativePool(em)).query<SnapshotRow>(RUNS_SNAPSHOT_SQL, [runIds]);
  for (const row of rows) {
    const ofRun = byRun.get(row.run_id);
    if (ofRun) ofRun.push(row);
    else byRun.set(row.run_id, [row]);
  }
  return runIds.filter((runId) => byRun.has(runId) && !waits(byRun.get(runId) ?? []));
}

type LockedRow = RunRow & DispatchRunFields & StageResultRow & { version: number; seen_version: number };

/**
 * The advance's transaction runs its statements' generic plans, by index: each finds its rows by key,
 * and the write, which gets its started results as arrays, was otherwise planned at every execution
 * (~0.4 ms, more than it takes to run).
 */
const inAdvanceTransaction = <T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> =>
  inTransaction(pool, work, { genericIndexPlans: true });

/**
 * Moves a run as far as it can go now, under a row lock on the run so concurrent workers take turns.
 * Every step is decided by the pure `nextRunStep` and applied with conditional updates, so running
 * this twice (a duplicated job, a sweeper re-drive) is harmless. Returns the results to dispatch
 * (with their stages, whose deadlines the caller schedules), which the caller enqueues after commit.
 */
export async function advanceRun(
  em: EntityManager,
  runId: string,
  executor: RunExecutor,
  settings: AdvanceSettings,
  options: { precheck?: boolean } = {},
): Promise<StartedResult[]> {
  // `precheck: false` when the caller knows there is work (a new run always moves): no extra statement.
  if ((options.precheck ?? true) && (await nothingToDo(em, runId))) return [];
  // On a client of its own (not the unit of work): its hot statements are prepared (see prepared.ts).
  return inAdvanceTransaction(await nativePool(em), async (client) => {
    const tx = clientRunner(client);
    const rows = await runPrepared<LockedRow>(client, LOCK_RUN_WITH_STAGES, [runId]);
    const run = rows[0];
    if (!run) return [];
    let { stages, results } = run.version === run.seen_version ? groupStages(rows) : await readStages(client, runId);
    if (run.status === 'pending' && stages.length === 0) {
      // Normally planned when the run was created; this is the repair for a run that was not.
      await insertPlannedStages(tx, runId, settings.issueToken);
      ({ stages, results } = await readStages(client, runId));
    }
    const snapshot: RunSnapshot = {
      status: run.status,
      planOnly: run.plan_only,
      autoApply: run.auto_apply,
      overridesEnabled: run.overrides_enabled,
    };
    const stageSnapshots = (): StageSnapshot[] => snapshotsOf(stages, results);
    // Decided step by step in memory, written once after the loop in one statement (one round trip):
    // every stage's status with its `<status>-at` keys, the started stages' pending results, and the run's
    // status with every `<status>-at` it passed (versions move by the number of transitions, as before).
    const runTransitions: string[] = [];
    let runWarning = false;
    const stageWrites = new Map<string, { status: TaskStageStatus; keys: string[] }>();
    const startedResults: ResultRow[] = [];
    const setRun = (status: RunStatus, warning = false): void => {
      runTransitions.push(statusTimestampKey(status));
      runWarning ||= warning;
      snapshot.status = status;
    };
    const setStage = (stage: StageRow, status: TaskStageStatus): void => {
      const key = statusTimestampKey(status);
      const write = stageWrites.get(stage.id) ?? { status, keys: [] };
      write.status = status;
      write.keys.push(key);
      stageWrites.set(stage.id, write);
      stage.status = status;
      stage.status_timestamps = { ...stage.status_timestamps, [key]: stage.status_timestamps[key] ?? new Date().toISOString() };
    };
    const write = async (): Promise<StartedResult[]> => {
      const parts: string[] = [];
      const params: unknown[] = [];
      for (const [id, stage] of stageWrites) {
        const keys = [...new Set(stage.keys)];
        parts.push(
          `stage${parts.length} as (update task_stages set status = ?, status_timestamps = ${timestampsSql(keys)},
             version = version + ?, updated_at = now() where id = ?)`,
        );
        params.push(stage.status, ...keys, stage.keys.length, id);
      }
      // Started results are claimed for their first attempt here (what dispatch's claim does for a retry):
      // leased, and read with what their payload needs. Their access tokens were issued when they were
      // planned; one planned without (by an earlier version) gets its token now.
      const issued = new Map(
        startedResults.filter((result) => result.tokenless).map((result) => [result.id, settings.issueToken(result.id)]),
      );
      if (startedResults.length > 0) {
        parts.push(
          `started as (update task_results tr set status = 'running', status_timestamps = ${timestampsSql(['running-at'])},
             version = tr.version + 1, updated_at = now(), progress_deadline = now() + make_interval(secs => ?),
             hard_deadline = now() + make_interval(secs => ?), attempts = tr.attempts + 1,
             next_attempt_at = now() + make_interval(secs => ?::double precision),
             callback_token_hash = coalesce(tr.callback_token_hash, t.hash),
             callback_token_encrypted = coalesce(tr.callback_token_encrypted, t.encrypted)
             from unnest(?::text[], ?::text[], ?::text[]) as t(id, hash, encrypted)
           where tr.id = t.id and tr.status = 'pending'
           returning ${DISPATCH_RESULT_COLUMNS}, tr.task_stage_id)`,
        );
        const tokens = startedResults.map((result) => issued.get(result.id));
        params.push(
          'running-at',
          settings.progressTimeoutSeconds,
          settings.maxRuntimeSeconds,
          settings.attemptLeaseSeconds,
          startedResults.map((result) => result.id),
          tokens.map((token) => token?.hash ?? null),
          tokens.map((token) => token?.encrypted ?? null),
        );
      }
      if (runTransitions.length > 0) {
        const keys = [...new Set(runTransitions)];
        parts.push(
          `run as (update runs set status = ?, status_timestamps = ${timestampsSql(keys)},
             version = version + ?, updated_at = now()${runWarning ? ', has_task_warnings = true' : ''} where id = ?)`,
        );
        params.push(snapshot.status, ...keys, runTransitions.length, runId);
      }
      if (parts.length === 0) return [];
      const started = await ADVANCE_WRITES.run<DispatchResultFields & { task_stage_id: string }>(
        client,
        // `started` returns an explicit column list, so `*` here cannot change under a cached plan.
        numbered(`with ${parts.join(',\n')} ${startedResults.length > 0 ? 'select * from started' : 'select null where false'}`),
        params,
      );
      const runFields = dispatchRunFields(run);
      const stageNames = new Map(stages.map((stage) => [stage.id, stage.stage]));
      // Every returned row is one of startedResults (joined on its id), in one of this run's stages.
      return started.map(({ task_stage_id: stageId, ...result }) => ({
        stageId,
        row: { ...result, ...runFields, stage: stageNames.get(stageId) as RunStage },
        issued: issued.get(result.id),
      }));
    };

    for (let step: RunStep = nextRunStep(snapshot, stageSnapshots()), count = 0; step.kind !== 'wait' && count < MAX_STEPS; count += 1) {
      switch (step.kind) {
        case 'set-run':
          setRun(step.status);
          break;
        case 'plan':
          await executor.plan(runId);
          setRun('planned');
          break;
        case 'apply':
          await executor.apply(runId);
          setRun('applied');
          break;
        case 'start-stage': {
          const name = step.stage;
          const stage = stages.find((candidate) => candidate.stage === name);
          if (stage && stage.status === 'pending') setStage(stage, 'running');
          if (stage) {
            // Its pending results start (written below; under the run's lock nothing else starts them).
            for (const result of results) {
              if (result.task_stage_id !== stage.id || result.status !== 'pending') continue;
              result.status = 'running';
              startedResults.push(result);
            }
          }
          setRun(step.runStatus);
          break;
        }
        case 'finish-stage': {
          const name = step.stage;
          const stage = stages.find((candidate) => candidate.stage === name);
          if (stage) setStage(stage, step.stageStatus);
          setRun(step.runStatus, step.warning);
          break;
        }
      }
      step = nextRunStep(snapshot, stageSnapshots());
    }
    const toDispatch = await write();
    if (ENDED.has(snapshot.status)) {
      // A run that stopped early leaves later stages unstarted: they will never run, so they end too.
      const canceledAt = `jsonb_build_object('canceled-at', ${DB_NOW_ISO})`;
      await tx.execute(
        `update task_results set status = 'canceled', status_timestamps = status_timestamps || ${canceledAt}, version = version + 1, updated_at = now()
          where status = 'pending' and task_stage_id in (select id from task_stages where run_id = ? and status = 'pending')`,
        [runId],
      );
      await tx.execute(
        `update task_stages set status = 'canceled', status_timestamps = status_timestamps || ${canceledAt}, version = version + 1, updated_at = now()
          where run_id = ? and status = 'pending'`,
        [runId],
      );
    }
    return toDispatch;
  });
}
