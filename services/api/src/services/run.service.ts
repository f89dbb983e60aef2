import type { EntityManager } from '@mikro-orm/postgresql';
import {
  conflict,
  DB_NOW_ISO,
  INSERT_RESULTS_SQL,
  INSERT_STAGES_SQL,
  insertResultsParams,
  insertStagesParams,
  JOBS,
  newId,
  numbered,
  PLANNABLE_TASKS_SQL,
  planRows,
  prepared,
  recordOutboxEvent,
  runActionSources,
  runActionTarget,
  runPrepared,
  stageStartedAtCreation,
  statusTimestampKey,
  EMPTY_PLAN_SUMMARY,
  readPlan,
  type CallbackTokenIssuer,
  type ExecutionMode,
  type Queryable,
  type ResultDeadlines,
  type Run,
  type RunAction,
  type RunOptions,
  runActionSubject,
  type RunCreatedJob,
  type TaskRow,
  type QueueState,
  admitAfterChange,
  nativePool,
} from '@runtasks/shared';
import type { RunView } from '../serializers/run.serializer.ts';
import { recordConfirmedBy } from './run-attributes.ts';

export interface CreateRunInput {
  message: string;
  planOnly: boolean;
  isDestroy: boolean;
  autoApply: boolean;
  planJson: unknown;
  configurationVersionId: string | null;
  createdBy: string | null;
  /** HCP's creation attributes the engine does not read (run-attributes.ts). */
  options?: RunOptions;
  /** Its place in the workspace's queue (run-queue.ts `queueStateAtCreation`); none: outside the queue. */
  queue?: QueueState | null;
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
 * status timestamps.
 */
const CREATE_RUN_SQL = `with run as (
    insert into runs (id, organization_id, workspace_id, plan_id, apply_id, execution_mode, has_changes, resource_additions, resource_changes,
                      resource_destructions, resource_imports, status, status_timestamps, message, is_destroy, plan_only, auto_apply,
                      has_task_warnings, stages_planned, created_by, configuration_version_id, plan_json, options, version, queue_state, created_at, updated_at)
    select ?, ?, ?, ?, ?, ?::text, ?::boolean, ?::int, ?::int, ?::int, ?::int, ?::text,
           coalesce(jsonb_object_agg(key, ${DB_NOW_ISO}) filter (where key is not null), '{}'), ?, ?, ?, ?, false, true, ?, ?,
           ?::jsonb, ?::jsonb, ?::int, ?::text, now(), now()
      from (select ?::text as key) started
    returning created_at, status_timestamps),
  event as (
    insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
    select ?::text, ?::text, jsonb_strip_nulls(jsonb_build_object('runId', ?::text, 'stageId', ?::text)), now(), 0),
  stages as (${INSERT_STAGES_SQL}),
  results as (${INSERT_RESULTS_SQL})
  select created_at, status_timestamps from run`;

const CREATE_RUN = prepared('create-run', numbered(CREATE_RUN_SQL));

interface RunCreation {
  params: unknown[];
  /** The `run.created` job's data, as its outbox event's payload has it. */
  job: RunCreatedJob;
  /** The run as created, once its created_at and status timestamps are known; its stages' ids in lifecycle order. */
  view: (createdAt: Date, statusTimestamps: Record<string, string>) => RunView;
  stageIds: string[];
}

function runCreation(
  place: RunPlace,
  input: CreateRunInput,
  tasks: readonly TaskRow[],
  issueToken: CallbackTokenIssuer,
  deadlines: ResultDeadlines,
): RunCreation {
  const id = newId('run');
  const planId = newId('plan');
  const applyId = newId('apply');
  // A plan given at creation is what the built-in executor's plan shows; a local run's is reported later.
  const reading = input.planJson === null || input.planJson === undefined ? undefined : readPlan(input.planJson);
  const summary = reading?.ok === true ? reading.summary : EMPTY_PLAN_SUMMARY;
  const planned = planRows(tasks, input);
  const stageIds = new Map(planned.stages.map((stage) => [stage.stage, stage.id]));
  // Overrides decide nothing before a stage has results to evaluate: the first step does not depend on them.
  // A run waiting in its workspace's queue starts nothing: its first stage starts when it is admitted.
  const started =
    input.queue === 'queued'
      ? undefined
      : stageStartedAtCreation(
          { planOnly: input.planOnly, autoApply: input.autoApply, overridesEnabled: false },
          planned.stages.map((stage) => stage.stage),
        );
  const startedStageId = started ? stageIds.get(started.stage) : undefined;
  const start = started && { stage: started.stage, ...deadlines };
  const status = started?.runStatus ?? 'pending';
  const params = [
    id,
    place.organizationId,
    place.workspaceId,
    planId,
    applyId,
    place.executionMode,
    summary.hasChanges,
    summary.resourceAdditions,
    summary.resourceChanges,
    summary.resourceDestructions,
    summary.resourceImports,
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
    id,
    id,
    startedStageId ?? null,
    ...insertStagesParams(id, planned.stages, start),
    ...insertResultsParams(planned.results, stageIds, input.planOnly, issueToken, start),
  ];
  const view = (createdAt: Date, statusTimestamps: Record<string, string>): RunView => ({
    id,
    status,
    statusTimestamps,
    message: input.message,
    isDestroy: input.isDestroy,
    planOnly: input.planOnly,
    autoApply: input.autoApply,
    hasTaskWarnings: false,
    createdAt,
    workspace: { id: place.workspaceId },
    planId,
    applyId,
    executionMode: place.executionMode,
    hasChanges: summary.hasChanges,
    configurationVersionId: input.configurationVersionId,
    ...{ options: input.options ?? {}, createdBy: input.createdBy, confirmedBy: null },
  });
  const job = startedStageId === undefined ? { runId: id } : { runId: id, stageId: startedStageId };
  return { params, job, view, stageIds: planned.stages.map((stage) => stage.id) };
}

/**
 * Creates a run with its task stages and results and its `run.created` outbox event, atomically.
 * Redis is not touched here: the caller may publish the returned job at once (the API does), and the
 * worker's relay publishes the event on its next poll either way, under the same job id, so a crash at
 * any point either loses nothing or creates nothing. `tasks` are the workspace's plannable tasks, read
 * by the caller (with the workspace, in one statement); `issueToken` issues each result's access token.
 * Returns the run, its stages' ids and its `run.created` job's data.
 */
export async function createRun(
  db: Queryable,
  place: RunPlace,
  input: CreateRunInput,
  tasks: readonly TaskRow[],
  issueToken: CallbackTokenIssuer,
  deadlines: ResultDeadlines,
): Promise<{ run: RunView; stageIds: string[]; job: RunCreatedJob }> {
  const creation = runCreation(place, input, tasks, issueToken, deadlines);
  const [row] = await runPrepared<{ created_at: Date; status_timestamps: Record<string, string> }>(db, CREATE_RUN, creation.params);
  return {
    run: creation.view(new Date(row?.created_at ?? Date.now()), row?.status_timestamps ?? {}),
    stageIds: creation.stageIds,
    job: creation.job,
  };
}

const PLANNABLE_TASKS = prepared('plannable-tasks', numbered(PLANNABLE_TASKS_SQL));

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

/** runActionTarget's condition for `apply` beyond the status, in SQL: not plan-only, and a local run's plan changes something. */
const APPLICABLE = ` and not plan_only and (execution_mode <> 'local' or has_changes)`;

/**
 * Applies a run action as one conditional update, so concurrent actions cannot both win; a run that
 * is canceled or discarded takes its unfinished stages and results with it.
 */
export async function applyRunAction(em: EntityManager, run: Run, action: RunAction, actorTokenId: string | null = null): Promise<void> {
  const target = runActionTarget(action, runActionSubject(run));
  if (!target)
    throw conflict(`A run that is ${run.status} cannot be ${action === 'apply' ? 'applied' : `${action}ed`}.`, 'transition not allowed');
  await em.transactional(async (tx) => {
    const sources = runActionSources(action);
    const updated = await tx.execute(
      `update runs set status = ?, status_timestamps = status_timestamps || jsonb_build_object(?::text, ${DB_NOW_ISO}),
              version = version + 1, updated_at = now()
        where id = ? and status in (${sources.map(() => '?').join(', ')})${action === 'apply' ? APPLICABLE : ''}`,
      [target, statusTimestampKey(target), run.id, ...sources],
      'run',
    );
    if ((updated as { affectedRows?: number }).affectedRows === 0) {
      throw conflict(
        `The run changed concurrently and can no longer be ${action === 'apply' ? 'applied' : `${action}ed`}.`,
        'transition not allowed',
      );
    }
    // Wake the workers (through the outbox, so the API never waits on Redis).
    await recordOutboxEvent(tx, JOBS.runAdvance, run.id);
    if (action === 'apply') return recordConfirmedBy(tx, run.id, actorTokenId);
    const canceledAt = `jsonb_build_object('canceled-at', ${DB_NOW_ISO})`;
    await tx.execute(
      // Locked in id order (then their stages, by the trigger), as the sweeper does, so the two never deadlock.
      `with open_results as (
         select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id
          where ts.run_id = ? and tr.status in ('pending', 'running') order by tr.id for update of tr)
       update task_results tr set status = 'canceled', status_timestamps = tr.status_timestamps || ${canceledAt},
              version = tr.version + 1, updated_at = now()
         from open_results where tr.id = open_results.id and tr.status in ('pending', 'running')`,
      [run.id],
    );
    await tx.execute(
      `update task_stages set status = 'canceled', status_timestamps = status_timestamps || ${canceledAt}, version = version + 1, updated_at = now()
        where run_id = ? and status in ('pending', 'running', 'awaiting_override')`,
      [run.id],
    );
  });
  if (action !== 'apply') await admitAfterChange(await nativePool(em), run.workspace.id, run.queueState);
}
