import { runPrepared, prepared, type Queryable } from '../db/prepared.ts';
import { DB_NOW_ISO, dbIso } from '../db/sql.ts';
import type { CallbackTokenIssuer } from '../security/secrets.ts';
import { newId } from '../domain/ids.ts';
import { planTaskStages, type PlannableTask } from '../domain/planner.ts';
import { RUN_STAGES, type EnforcementLevel, type RunStage } from '../domain/statuses.ts';
import { deadlineIn, type ResultDeadlines } from './deadlines.ts';

export { resultDeadlines, type ResultDeadlines } from './deadlines.ts';

/** A row of PLANNABLE_TASKS. */
export interface TaskRow {
  task_id: string;
  workspace_task_id: string | null;
  name: string;
  url: string;
  hmac_key_encrypted: string | null;
  enabled: boolean;
  enforcement_level: EnforcementLevel;
  stages: RunStage[];
}

const toPlannable = (row: TaskRow): PlannableTask => ({
  taskId: row.task_id,
  workspaceTaskId: row.workspace_task_id,
  name: row.name,
  url: row.url,
  hmacKeyEncrypted: row.hmac_key_encrypted,
  enabled: row.enabled,
  enforcementLevel: row.enforcement_level,
  stages: row.stages,
});

/** What planning needs to know of the run, which the API has at hand when it creates one. */
export interface PlanContext {
  workspaceId: string;
  organizationId: string;
  planOnly: boolean;
  /** The organization may use global run tasks (standard edition with them switched on). */
  globalEntitled: boolean;
}

/**
 * The union under PLANNABLE_TASKS, over SQL expressions for the workspace, the organization and
 * the entitlement (parameters, or an outer query's columns), with its sort keys source, at, tiebreak.
 */
export const plannableTasksUnion = (workspace: string, organization: string, globalEntitled: string): string => `
    select 0 as source, wt.created_at as at, wt.id as tiebreak, t.id as task_id, wt.id as workspace_task_id, t.name, t.url,
           t.hmac_key_encrypted, t.enabled, wt.enforcement_level, wt.stages
      from workspace_tasks wt join run_tasks t on t.id = wt.task_id
     where wt.workspace_id = ${workspace}
    union all
    select 1, t.created_at, t.id, t.id, null, t.name, t.url, t.hmac_key_encrypted, t.enabled, t.global_enforcement_level, t.global_stages
      from run_tasks t where t.organization_id = ${organization} and ${globalEntitled} and t.global_enabled`;

/**
 * The workspace's attached tasks, then (when entitled) the organization's global ones, each in
 * creation order: one statement. $1 workspace, $2 organization, $3 entitled to global tasks.
 */
export const PLANNABLE_TASKS = prepared(
  'plannable-tasks',
  `select task_id, workspace_task_id, name, url, hmac_key_encrypted, enabled, enforcement_level, stages
     from (${plannableTasksUnion('$1', '$2', '$3::boolean')}) tasks
   order by source, at, tiebreak`,
);

export interface InsertedStage {
  id: string;
  stage: RunStage;
}

/**
 * Plans a run's task stages and results and inserts them idempotently: unique (run, stage) and
 * (stage, task) with ON CONFLICT DO NOTHING make a second call, by anyone, a no-op. Run inside the
 * transaction that repairs a run (the worker), which knows only its id.
 */
export async function insertPlannedStages(tx: Queryable, runId: string, issueToken: CallbackTokenIssuer): Promise<InsertedStage[]> {
  const { rows } = await tx.query<{ workspace_id: string; organization_id: string; plan_only: boolean; global_entitled: boolean }>(
    `select r.workspace_id, r.organization_id, r.plan_only, (o.edition = 'standard' and o.global_run_tasks_enabled) as global_entitled
       from runs r join organizations o on o.id = r.organization_id where r.id = $1`,
    [runId],
  );
  const [run] = rows;
  if (!run) return [];
  return insertPlannedStagesFor(
    tx,
    runId,
    {
      workspaceId: run.workspace_id,
      organizationId: run.organization_id,
      planOnly: run.plan_only,
      globalEntitled: run.global_entitled,
    },
    issueToken,
  );
}

/** A run's planned stages and results, with their ids, ready to insert. */
export interface PlannedRows {
  stages: { id: string; stage: RunStage; openResults: number }[];
  results: { id: string; stage: RunStage; task: PlannableTask }[];
}

/** Plans the rows of a run from its plannable tasks (PLANNABLE_TASKS' rows): stages in lifecycle order. */
export function planRows(tasks: readonly TaskRow[], run: Pick<PlanContext, 'planOnly'>): PlannedRows {
  const planned = planTaskStages({
    workspaceTasks: tasks.filter((task) => task.workspace_task_id !== null).map(toPlannable),
    globalTasks: tasks.filter((task) => task.workspace_task_id === null).map(toPlannable),
    speculative: run.planOnly,
  });
  const stages = planned
    .map(({ stage, tasks: planned }) => ({ id: newId('taskStage'), stage, openResults: planned.length }))
    .sort((a, b) => RUN_STAGES.indexOf(a.stage) - RUN_STAGES.indexOf(b.stage));
  const results = planned.flatMap(({ stage, tasks: planned }) => planned.map((task) => ({ id: newId('taskResult'), stage, task })));
  return { stages, results };
}

/**
 * What a run that starts a stage as it is created (stageStartedAtCreation) writes with its rows: that
 * stage `running` and its results `running`, as the worker's advance would have started them, but not
 * yet claimed for their first delivery attempt (attempts 0, due now): the worker claims and delivers them.
 */
export interface CreationStart extends ResultDeadlines {
  stage: RunStage;
}

/** `$n` placeholders numbered from `first` (a statement embedding another's parameters after its own). */
const placeholders =
  (first: number) =>
  (index: number): string =>
    `$${first + index}`;

/**
 * How planned rows are inserted: `idempotent` where another may have planned the run first (the
 * worker's repair: ON CONFLICT DO NOTHING makes the second a no-op), `fresh` in the statement that
 * creates the run itself, where no row can exist yet. A fresh insert skips the speculative insertion an
 * ON CONFLICT clause makes of every row (its confirmation record in the WAL, its extra index probe).
 */
export type InsertMode = 'idempotent' | 'fresh';

/**
 * Inserts planned stages, its parameters numbered from `first`: the run, then arrays of ids, stages and open-result counts, then the stage
 * started at creation or null (one statement whatever their number, and the same text, so it can be
 * prepared). open_results starts at the stage's number of results (all open); the task_results trigger
 * counts it down as they end. A started stage has its `running-at` and its version moved once, as the advance moves them.
 */
export const insertStagesSql = (first: number, mode: InsertMode = 'idempotent'): string => {
  const $ = placeholders(first);
  return `insert into task_stages (id, run_id, stage, status, status_timestamps, open_results, version, created_at, updated_at)
  select s.id, ${$(0)}, s.stage, case when s.started then 'running' else 'pending' end,
         case when s.started then jsonb_build_object('running-at', ${DB_NOW_ISO}) else '{}' end, s.open_results,
         case when s.started then 2 else 1 end, now(), now()
    from (select u.*, u.stage = start.stage as started
            from unnest(${$(1)}::text[], ${$(2)}::text[], ${$(3)}::int[]) as u(id, stage, open_results), (select ${$(4)}::text as stage) start) s
  ${mode === 'idempotent' ? 'on conflict (run_id, stage) do nothing ' : ''}returning id, stage`;
};

export const insertStagesParams = (runId: string, stages: PlannedRows['stages'], start?: CreationStart): unknown[] => [
  runId,
  stages.map((stage) => stage.id),
  stages.map((stage) => stage.stage),
  stages.map((stage) => stage.openResults),
  start?.stage ?? null,
];

/**
 * Inserts planned results, its parameters numbered from `first`: whether the run is speculative, then arrays of ids, stage ids, task ids,
 * workspace task ids, names, URLs, HMAC keys (encrypted), enforcement levels, stages, and access tokens
 * (hashed, encrypted), then the stage started at creation (or null) with its progress timeout and
 * maximum runtime in seconds. created_at keeps the planned order (results are listed by it): one clock
 * reading per row, plus the row's position in microseconds so rows inserted within the same microsecond
 * stay ordered. A result's token is issued here rather than when its stage starts, so that the start
 * changes no indexed column and stays on its page (Migration20261124120000HotTaskResults); nobody knows
 * the token until a delivery sends it. A started result gets its deadlines, is due for its first
 * attempt now, and started running as it was created (its running-at is its created_at: the statement's
 * now() can be milliseconds older when it waited).
 */
export const insertResultsSql = (first: number, mode: InsertMode = 'idempotent'): string => {
  const $ = placeholders(first);
  return `insert into task_results (id, task_stage_id, task_id, workspace_task_id, task_name, task_url, hmac_key_encrypted,
                           enforcement_level, stage, is_speculative, status, status_timestamps, attempts, outcomes_count,
                           callback_token_hash, callback_token_encrypted, progress_deadline, hard_deadline, next_attempt_at,
                           version, created_at, updated_at)
  select r.id, r.stage_id, r.task_id, r.workspace_task_id, r.name, r.url, r.hmac_key_encrypted, r.enforcement_level, r.stage, ${$(0)}::boolean,
         case when r.started then 'running' else 'pending' end,
         case when r.started then jsonb_build_object('running-at', ${dbIso('r.created_at')}) else '{}' end, 0, 0, r.token_hash, r.token_encrypted,
         case when r.started then ${deadlineIn('r.progress_seconds')} end,
         case when r.started then ${deadlineIn('r.max_seconds')} end,
         case when r.started then now() end, case when r.started then 2 else 1 end, r.created_at, r.created_at
    from (select u.*, u.stage = start.stage as started, start.progress_seconds, start.max_seconds,
                 clock_timestamp() + u.position * interval '1 microsecond' as created_at
            from unnest(${[...Array(11).keys()].map((index) => `${$(index + 1)}::text[]`).join(', ')})
                 with ordinality as u(id, stage_id, task_id, workspace_task_id, name, url, hmac_key_encrypted, enforcement_level, stage,
                                      token_hash, token_encrypted, position),
                 (select ${$(12)}::text as stage, ${$(13)}::double precision as progress_seconds, ${$(14)}::double precision as max_seconds) start) r
  ${mode === 'idempotent' ? 'on conflict do nothing' : ''}`;
};

export function insertResultsParams(
  results: PlannedRows['results'],
  stageIds: ReadonlyMap<RunStage, string>,
  planOnly: boolean,
  issueToken: CallbackTokenIssuer,
  start?: CreationStart,
): unknown[] {
  const tokens = results.map((result) => issueToken(result.id));
  return [
    planOnly,
    results.map((result) => result.id),
    results.map((result) => stageIds.get(result.stage)),
    results.map((result) => result.task.taskId),
    results.map((result) => result.task.workspaceTaskId),
    results.map((result) => result.task.name),
    results.map((result) => result.task.url),
    results.map((result) => result.task.hmacKeyEncrypted),
    results.map((result) => result.task.enforcementLevel),
    results.map((result) => result.stage),
    tokens.map((token) => token.hash),
    tokens.map((token) => token.encrypted),
    start?.stage ?? null,
    start?.taskProgressTimeoutSeconds ?? null,
    start?.taskMaxRuntimeSeconds ?? null,
  ];
}

/** As insertPlannedStages, for a caller that knows the run. Returns the run's stages in lifecycle order. */
const INSERT_STAGES_SQL = insertStagesSql(1);
const INSERT_RESULTS_SQL = insertResultsSql(1);

export async function insertPlannedStagesFor(
  tx: Queryable,
  runId: string,
  run: PlanContext,
  issueToken: CallbackTokenIssuer,
): Promise<InsertedStage[]> {
  const tasks = await runPrepared<TaskRow>(tx, PLANNABLE_TASKS, [run.workspaceId, run.organizationId, run.globalEntitled]);
  const planned = planRows(tasks, run);
  if (planned.stages.length === 0) return [];
  // Two statements whatever the number of stages and tasks: every stage, then (with their ids) every result.
  const { rows: inserted } = await tx.query<InsertedStage>(INSERT_STAGES_SQL, insertStagesParams(runId, planned.stages));
  // A stage that already existed (planned by someone else first) is not returned: read the ids then.
  const stageRows =
    inserted.length === planned.stages.length
      ? inserted
      : (await tx.query<InsertedStage>(`select id, stage from task_stages where run_id = $1`, [runId])).rows;
  const stages = [...stageRows].sort((a, b) => RUN_STAGES.indexOf(a.stage) - RUN_STAGES.indexOf(b.stage));
  if (planned.results.length === 0) return stages;
  await tx.query(
    INSERT_RESULTS_SQL,
    insertResultsParams(planned.results, new Map(stageRows.map((row) => [row.stage, row.id])), run.planOnly, issueToken),
  );
  return stages;
}
