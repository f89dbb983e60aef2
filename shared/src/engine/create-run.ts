import { prepared, runPrepared, type Queryable } from '../db/prepared.ts';
import { DB_NOW_ISO } from '../db/sql.ts';
import { newId } from '../domain/ids.ts';
import { stageStartedAtCreation, type StageStart } from '../domain/lifecycle.ts';
import { EMPTY_PLAN_SUMMARY, readPlan, type PlanSummary } from '../domain/plan-summary.ts';
import type { QueueState } from '../domain/run-queue.ts';
import type { RunOptions } from '../domain/run-options.ts';
import type { ExecutionMode, RunStatus } from '../domain/statuses.ts';
import { statusTimestampKey } from '../domain/timestamps.ts';
import { JOBS, type RunCreatedJob } from '../queue/names.ts';
import type { CallbackTokenIssuer } from '../security/secrets.ts';
import type { ResultDeadlines } from './deadlines.ts';
import {
  insertResultsParams,
  insertResultsSql,
  insertStagesParams,
  insertStagesSql,
  planRows,
  PLANNABLE_TASKS,
  type PlannedRows,
  type TaskRow,
} from './plan-run.ts';

export interface CreateRunInput {
  message: string;
  planOnly: boolean;
  isDestroy: boolean;
  autoApply: boolean;
  planJson: unknown;
  configurationVersionId: string | null;
  createdBy: string | null;
  /** HCP's creation attributes the engine does not read (refresh, target-addrs, variables, ...). */
  options?: RunOptions;
  /** Its place in the workspace's queue (run-queue.ts `queueStateAtCreation`); none: outside the queue. */
  queue?: QueueState | null;
  /**
   * The creating request's Idempotency-Key and a fingerprint of its body: a second run with the same key
   * in the workspace is refused by a unique index (`isIdempotencyKeyTaken`), whatever the race.
   */
  idempotency?: { key: string; fingerprint: string } | null;
}

/** The workspace a run is created in, as planning needs it. */
export interface RunPlace {
  workspaceId: string;
  organizationId: string;
  /** The organization may use global run tasks (standard edition with them switched on). */
  globalEntitled: boolean;
  /** The workspace's execution mode, which the run keeps. */
  executionMode: ExecutionMode;
}

/**
 * A run, its `run.created` outbox event and its planned task stages and results, in one statement:
 * atomic without an explicit transaction, and the same text whatever the number of stages and tasks
 * (arrays), so it is prepared. A run with a stage to start at once (pre_plan tasks) is created in it,
 * with that stage and its results running, and its event names the stage, whose results the worker
 * then claims and delivers; any other run is `pending` (its event wakes the worker's advance). The
 * event has no NOTIFY: the API publishes its job itself once this has committed (createRun's caller),
 * and the relay, on its next poll, publishes whatever that missed. Returns the run's created_at and
 * status timestamps. Its run event (`created`, by the creator) is written with it.
 * $1 … $27 the run and its outbox event, $28 $29 its idempotency key and fingerprint; the stages'
 * parameters follow, then the results', then $50 the run event's id.
 */
const CREATE_RUN = prepared(
  'create-run',
  `with run as (
    insert into runs (id, organization_id, workspace_id, plan_id, apply_id, execution_mode, has_changes, resource_additions, resource_changes,
                      resource_destructions, resource_imports, status, status_timestamps, message, is_destroy, plan_only, auto_apply,
                      has_task_warnings, stages_planned, created_by, configuration_version_id, plan_json, options, version, queue_state,
                      idempotency_key, idempotency_fingerprint, created_at, updated_at)
    select $1, $2, $3, $4, $5, $6::text, $7::boolean, $8::int, $9::int, $10::int, $11::int, $12::text,
           coalesce(jsonb_object_agg(key, ${DB_NOW_ISO}) filter (where key is not null), '{}'), $13, $14, $15, $16, false, true, $17, $18,
           $19::jsonb, $20::jsonb, $21::int, $22::text, $28::text, $29::text, now(), now()
      from (select $23::text as key) started
    returning created_at, status_timestamps),
  event as (
    insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
    select $24::text, $25::text, jsonb_strip_nulls(jsonb_build_object('runId', $26::text, 'stageId', $27::text)), now(), 0),
  stages as (${insertStagesSql(30, 'fresh')}),
  results as (${insertResultsSql(35, 'fresh')}),
  created as (insert into run_events (id, run_id, action, actor_id, created_at) select $50, $1, 'created', $17, now())
  select created_at, status_timestamps from run`,
);

/**
 * Whether a new run starts now, and where: the stage it starts in (its first, where that has tasks and
 * nothing before it needs the run to wait), or undefined for a run created `pending`, which the worker's
 * advance moves on. The one place a run's start at creation is decided.
 */
export function startAtCreation(
  input: Pick<CreateRunInput, 'planOnly' | 'autoApply' | 'queue'>,
  planned: PlannedRows,
): StageStart | undefined {
  // A run waiting in its workspace's queue starts nothing: its first stage starts when it is admitted.
  if (input.queue === 'queued') return undefined;
  // Overrides decide nothing before a stage has results to evaluate: the first step does not depend on them.
  return stageStartedAtCreation(
    { planOnly: input.planOnly, autoApply: input.autoApply, overridesEnabled: false },
    planned.stages.map((stage) => stage.stage),
  );
}

/** A run as its creation wrote it (what the API's view of it needs beyond what it gave). */
export interface CreatedRun {
  id: string;
  planId: string;
  applyId: string;
  status: RunStatus;
  summary: PlanSummary;
  createdAt: Date;
  statusTimestamps: Record<string, string>;
  /** Its stages' ids in lifecycle order. */
  stageIds: string[];
  /** The `run.created` job's data, as its outbox event's payload has it. */
  job: RunCreatedJob;
}

function creationParams(
  ids: { id: string; planId: string; applyId: string },
  place: RunPlace,
  input: CreateRunInput,
  summary: PlanSummary,
): unknown[] {
  return [
    ids.id,
    place.organizationId,
    place.workspaceId,
    ids.planId,
    ids.applyId,
    place.executionMode,
    summary.hasChanges,
    summary.resourceAdditions,
    summary.resourceChanges,
    summary.resourceDestructions,
    summary.resourceImports,
  ];
}

/**
 * Creates a run with its task stages and results and its `run.created` outbox event, atomically.
 * Redis is not touched here: the caller may publish the returned job at once (the API does), and the
 * worker's relay publishes the event on its next poll either way, under the same job id, so a crash at
 * any point either loses nothing or creates nothing. `tasks` are the workspace's plannable tasks, read
 * by the caller (with the workspace, in one statement); `issueToken` issues each result's access token.
 */
export async function createRun(
  db: Queryable,
  place: RunPlace,
  input: CreateRunInput,
  tasks: readonly TaskRow[],
  issueToken: CallbackTokenIssuer,
  deadlines: ResultDeadlines,
): Promise<CreatedRun> {
  const ids = { id: newId('run'), planId: newId('plan'), applyId: newId('apply') };
  // A plan given at creation is what the built-in executor's plan shows; a local run's is reported later.
  const reading = input.planJson === null || input.planJson === undefined ? undefined : readPlan(input.planJson);
  const summary = reading?.ok === true ? reading.summary : EMPTY_PLAN_SUMMARY;
  const planned = planRows(tasks, input);
  const stageIds = new Map(planned.stages.map((stage) => [stage.stage, stage.id]));
  const started = startAtCreation(input, planned);
  const startedStageId = started ? stageIds.get(started.stage) : undefined;
  const start = started && { stage: started.stage, ...deadlines };
  const status = started?.runStatus ?? 'pending';
  const params = [
    ...creationParams(ids, place, input, summary),
    status,
    input.message,
    input.isDestroy,
    input.planOnly,
    input.autoApply,
    input.createdBy,
    input.configurationVersionId,
    input.planJson === null || input.planJson === undefined ? null : JSON.stringify(input.planJson),
    JSON.stringify(input.options ?? {}),
    // Versions count transitions, as the advance moves them.
    started ? 2 : 1,
    input.queue ?? null,
    started ? statusTimestampKey(started.runStatus) : null,
    JOBS.runCreated,
    ids.id,
    ids.id,
    startedStageId ?? null,
    input.idempotency?.key ?? null,
    input.idempotency?.fingerprint ?? null,
    ...insertStagesParams(ids.id, planned.stages, start),
    ...insertResultsParams(planned.results, stageIds, input.planOnly, issueToken, start),
    newId('runEvent'),
  ];
  const [row] = await runPrepared<{ created_at: Date; status_timestamps: Record<string, string> }>(db, CREATE_RUN, params);
  return {
    ...ids,
    status,
    summary,
    createdAt: new Date(row?.created_at ?? Date.now()),
    statusTimestamps: row?.status_timestamps ?? {},
    stageIds: planned.stages.map((stage) => stage.id),
    job: startedStageId === undefined ? { runId: ids.id } : { runId: ids.id, stageId: startedStageId },
  };
}

/** Whether a creation failed because its Idempotency-Key names a run of the workspace already (another request won). */
export const isIdempotencyKeyTaken = (error: unknown): boolean =>
  (error as { code?: unknown }).code === '23505' && (error as { constraint?: unknown }).constraint === 'runs_workspace_idempotency_key_idx';

/** As createRun, on a client inside a caller's transaction, planning from the database. Returns the run's job, to publish after commit. */
export async function createRunIn(
  client: Queryable,
  place: RunPlace,
  input: CreateRunInput,
  issueToken: CallbackTokenIssuer,
  deadlines: ResultDeadlines,
): Promise<RunCreatedJob> {
  const tasks = await runPrepared<TaskRow>(client, PLANNABLE_TASKS, [place.workspaceId, place.organizationId, place.globalEntitled]);
  return (await createRun(client, place, input, tasks, issueToken, deadlines)).job;
}
