import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import {
  evaluateStage,
  FINAL_RESULT_STATUSES,
  FINAL_RUN_STATUSES,
  FINAL_STAGE_STATUSES,
  nextRunStep,
  planTaskStages,
  statusTimestampKey,
  type EnforcementLevel,
  type PlannableTask,
  type RunStage,
  type RunStatus,
  type StageSnapshot,
  type TaskResultStatus,
  type TaskStageStatus,
} from '@runtasks/shared/domain';
import type { Redis } from 'ioredis';
import { queueViolations } from './queue-invariants.ts';

/**
 * The "nothing lost" invariants, as SQL over the database (and, optionally, a scan of BullMQ's keys in
 * Redis). Run them once the system is quiet after a fault; every broken rule becomes one line in
 * `violations`, naming the row and the invariant (listed in docs/resilience.md):
 *
 * - INV-1 stages: a run has exactly the task stages its tasks call for, one per run stage.
 * - INV-2 results: a stage has one result per task it calls for, none without its stage.
 * - INV-3 no stuck result: an open result has a deadline that has not long passed, in a live stage.
 * - INV-4 no stuck run: every run is final, waits for a person, or has something that will move it.
 * - INV-5 enforcement: a final stage's status is what its results and their enforcement say.
 * - INV-6 timestamps: the current status has its timestamp, each set once, in order, after creation.
 * - INV-7 outbox: no event stays unpublished past the grace.
 * - INV-10 secrets: no token or HMAC key in what BullMQ keeps in Redis.
 * - INV-12 run queue: one holder per workspace at most; a waiting run started nothing and waits behind something (queue-invariants.ts).
 *
 * INV-9 (deliveries signed and for one result each) and INV-11 (no 5xx but 503, no unplanned exit)
 * are checked over the task servers' ledgers and the processes in test/support/cluster.ts.
 */

/** A pg `Client`/`Pool` (`$1` placeholders), or anything with MikroORM's `execute` (`?` placeholders). */
interface PgLike {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
export type InvariantSource = EntityManager | MikroORM | PgLike;

export interface InvariantOptions {
  /** Check only these runs (default: every run in the database). Global checks (outbox, duplicates) still cover everything. */
  runIds?: readonly string[];
  /**
   * How long a transient state may last before it is a violation: an expired deadline the sweeper has
   * not ended yet, an unpublished outbox row, a run between two jobs. Default 10 s.
   */
  graceSeconds?: number;
  /** The system is quiet: every run must be final or waiting by design; none may still be moving. Default false. */
  quiescent?: boolean;
  /**
   * Compare each run's stages and results with the plan of its workspace's associations as they were
   * when it was created (runs whose tasks or associations changed since are skipped). Default true.
   */
  checkPlan?: boolean;
  /** Scan BullMQ's keys (`<prefix>:<queue>:*`) for secrets; also lets a queued job count as "something that will move" a run. */
  queue?: { redis: Redis; prefix: string; queueName?: string };
  /** Values that must never appear in Redis, besides anything shaped like an API or callback token (HMAC keys, known tokens). */
  secrets?: readonly string[];
}

export interface InvariantCounts {
  runs: number;
  final: number;
  awaitingDecision: number;
  awaitingConfirmation: number;
  waitingOnTasks: number;
  /** Runs waiting `pending` in their workspace's queue (INV-12 checks them). */
  waitingInQueue: number;
  moving: number;
  stages: number;
  results: number;
  openResults: number;
  planChecked: number;
  planSkipped: number;
  unpublishedOutbox: number;
  queueKeysScanned: number;
}

export interface InvariantReport {
  violations: string[];
  counts: InvariantCounts;
}

interface RunRow {
  id: string;
  status: RunStatus;
  plan_only: boolean;
  auto_apply: boolean;
  overrides_enabled: boolean;
  global_entitled: boolean;
  workspace_id: string;
  organization_id: string;
  status_timestamps: Record<string, string>;
  created_ms: string | number;
  idle_seconds: string | number;
  queue_state: string | null;
}
interface StageRow {
  id: string;
  run_id: string;
  stage: RunStage;
  status: TaskStageStatus;
  status_timestamps: Record<string, string>;
}
interface ResultRow {
  id: string;
  task_stage_id: string;
  task_id: string;
  workspace_task_id: string | null;
  stage: RunStage;
  status: TaskResultStatus;
  enforcement_level: EnforcementLevel;
  status_timestamps: Record<string, string>;
  created_ms: string | number;
  progress_left: string | number | null;
  hard_left: string | number | null;
}
interface AssociationRow {
  id: string;
  workspace_id: string;
  task_id: string;
  enforcement_level: EnforcementLevel;
  stages: RunStage[];
  created_ms: string | number;
  updated_ms: string | number;
}
interface TaskRow {
  id: string;
  organization_id: string;
  name: string;
  url: string;
  enabled: boolean;
  global_enabled: boolean;
  global_stages: RunStage[];
  global_enforcement_level: EnforcementLevel;
  created_ms: string | number;
  updated_ms: string | number;
}

type Query = <T>(sql: string, params?: unknown[]) => Promise<T[]>;

function queryOf(source: InvariantSource): Query {
  if ('em' in source) return queryOf(source.em.fork());
  if ('execute' in source) {
    const em = source;
    return <T>(sql: string, params: unknown[] = []) => em.execute<T[]>(sql, params);
  }
  const pg = source;
  return async <T>(sql: string, params: unknown[] = []) => {
    let n = 0;
    const result = await pg.query(
      sql.replace(/\?/g, () => `$${++n}`),
      params,
    );
    return result.rows as T[];
  };
}

const ms = (value: string | number): number => Number(value);
const seconds = (value: string | number | null): number | null => (value === null ? null : Number(value));

/** Epoch milliseconds of a column, so no Date handling depends on the driver or time zones. */
const epochMs = (column: string): string => `(extract(epoch from ${column}) * 1000)::float8`;

/** Timestamp keys and their epoch values; a value that does not parse is reported. */
function timestamps(what: string, stamps: Record<string, string>, violations: string[]): Map<string, number> {
  const parsed = new Map<string, number>();
  for (const [key, value] of Object.entries(stamps ?? {})) {
    const time = Date.parse(value);
    if (Number.isNaN(time)) violations.push(`${what}: status-timestamps["${key}"] is not a timestamp (${JSON.stringify(value)})`);
    else parsed.set(key, time);
  }
  return parsed;
}

const toPlannable = (task: TaskRow, association: AssociationRow | null): PlannableTask => ({
  taskId: task.id,
  workspaceTaskId: association?.id ?? null,
  name: task.name,
  url: task.url,
  hmacKeyEncrypted: null,
  enabled: task.enabled,
  enforcementLevel: association ? association.enforcement_level : task.global_enforcement_level,
  stages: association ? association.stages : task.global_stages,
});

function escapeGlob(value: string): string {
  return value.replace(/[*?[\]\\]/g, (char) => `\\${char}`);
}

const TOKEN_PATTERNS: readonly [string, RegExp][] = [
  ['an API token (rtk_…)', /rtk_[A-Za-z0-9_-]{20,}/],
  ['a callback token (rtcb_…)', /rtcb_[A-Za-z0-9_-]{20,}/],
];

/** Every value stored under the queue's keys, by key (hashes, strings, lists, sets, sorted sets, streams). */
async function queueValues(redis: Redis, pattern: string): Promise<Map<string, string[]>> {
  const values = new Map<string, string[]>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let items: string[] = [];
      if (type === 'hash') items = Object.entries(await redis.hgetall(key)).flat();
      else if (type === 'string') items = [(await redis.get(key)) ?? ''];
      else if (type === 'list') items = await redis.lrange(key, 0, -1);
      else if (type === 'set') items = await redis.smembers(key);
      else if (type === 'zset') items = await redis.zrange(key, '0', '-1');
      else if (type === 'stream') items = (await redis.xrange(key, '-', '+')).flatMap(([id, fields]) => [id, ...fields]);
      values.set(key, items);
    }
  } while (cursor !== '0');
  return values;
}

/** Run and result ids named by jobs that are still to run (waiting, delayed, prioritized, paused or active). */
async function queuedWork(redis: Redis, base: string): Promise<{ runIds: Set<string>; resultIds: Set<string> }> {
  const ids = new Set<string>([
    ...(await redis.lrange(`${base}:wait`, 0, -1)),
    ...(await redis.lrange(`${base}:paused`, 0, -1)),
    ...(await redis.lrange(`${base}:active`, 0, -1)),
    ...(await redis.zrange(`${base}:delayed`, '0', '-1')),
    ...(await redis.zrange(`${base}:prioritized`, '0', '-1')),
  ]);
  const runIds = new Set<string>();
  const resultIds = new Set<string>();
  for (const id of ids) {
    const data = await redis.hget(`${base}:${id}`, 'data');
    if (!data) continue;
    try {
      const parsed = JSON.parse(data) as { runId?: unknown; resultId?: unknown };
      if (typeof parsed.runId === 'string') runIds.add(parsed.runId);
      if (typeof parsed.resultId === 'string') resultIds.add(parsed.resultId);
    } catch {
      // Not JSON: not one of ours.
    }
  }
  return { runIds, resultIds };
}

/**
 * Checks the invariants and returns every violation found (an empty list when all hold) with counts
 * of what was looked at. Read-only; safe to call while the system runs (then leave `quiescent` off).
 */
export async function checkInvariants(source: InvariantSource, options: InvariantOptions = {}): Promise<InvariantReport> {
  const query = queryOf(source);
  const grace = options.graceSeconds ?? 10;
  const violations: string[] = [];
  const counts: InvariantCounts = {
    runs: 0,
    final: 0,
    awaitingDecision: 0,
    awaitingConfirmation: 0,
    waitingOnTasks: 0,
    waitingInQueue: 0,
    moving: 0,
    stages: 0,
    results: 0,
    openResults: 0,
    planChecked: 0,
    planSkipped: 0,
    unpublishedOutbox: 0,
    queueKeysScanned: 0,
  };

  // INV-1/INV-2 at the database level: no duplicates, no orphans (whatever the constraints say today).
  for (const row of await query<{ run_id: string; stage: string; n: string | number }>(
    `select run_id, stage, count(*) as n from task_stages group by run_id, stage having count(*) > 1`,
  ))
    violations.push(`run ${row.run_id}: ${row.n} task stages for ${row.stage} (INV-1: exactly one per run stage)`);
  for (const row of await query<{ task_stage_id: string; task_id: string; n: string | number }>(
    `select task_stage_id, task_id, count(*) as n from task_results group by task_stage_id, task_id having count(*) > 1`,
  ))
    violations.push(`task stage ${row.task_stage_id}: ${row.n} results for task ${row.task_id} (INV-2: one result per task)`);
  for (const row of await query<{ task_stage_id: string; workspace_task_id: string; n: string | number }>(
    `select task_stage_id, workspace_task_id, count(*) as n from task_results where workspace_task_id is not null
      group by task_stage_id, workspace_task_id having count(*) > 1`,
  ))
    violations.push(
      `task stage ${row.task_stage_id}: ${row.n} results for workspace task ${row.workspace_task_id} (INV-2: one result per association)`,
    );
  for (const row of await query<{ id: string; task_stage_id: string }>(
    `select tr.id, tr.task_stage_id from task_results tr left join task_stages ts on ts.id = tr.task_stage_id where ts.id is null`,
  ))
    violations.push(`task result ${row.id}: its task stage ${row.task_stage_id} does not exist (INV-2: no result without a stage)`);
  for (const row of await query<{ id: string; run_id: string }>(
    `select ts.id, ts.run_id from task_stages ts left join runs r on r.id = ts.run_id where r.id is null`,
  ))
    violations.push(`task stage ${row.id}: its run ${row.run_id} does not exist (INV-1)`);

  // Deadlines: a result's progress deadline never outlives its hard deadline (a start sets both, and a
  // `running` callback moves the progress deadline on only up to the hard one).
  for (const row of await query<{ id: string; over: string | number }>(
    `select id, extract(epoch from progress_deadline - hard_deadline)::float8 as over from task_results where progress_deadline > hard_deadline`,
  ))
    violations.push(`task result ${row.id}: its progress deadline is ${Number(row.over).toFixed(1)} s after its hard deadline (deadlines)`);

  // INV-7: the outbox drains.
  const unpublished = await query<{ id: string; topic: string; aggregate_id: string; age: string | number }>(
    `select id, topic, aggregate_id, extract(epoch from now() - created_at)::float8 as age from outbox_events where published_at is null order by id`,
  );
  counts.unpublishedOutbox = unpublished.length;
  for (const row of unpublished) {
    if (Number(row.age) > grace)
      violations.push(
        `outbox event ${row.id} (${row.topic} for ${row.aggregate_id}) unpublished for ${Number(row.age).toFixed(1)} s (INV-7: grace ${grace} s)`,
      );
  }
  const unpublishedFor = new Set(unpublished.map((row) => row.aggregate_id));

  const wanted = options.runIds ? new Set(options.runIds) : undefined;
  const runs = (
    await query<RunRow>(
      `select r.id, r.status, r.plan_only, r.auto_apply, o.task_overrides_enabled as overrides_enabled,
              (o.edition = 'standard' and o.global_run_tasks_enabled) as global_entitled, r.workspace_id, r.organization_id,
              r.status_timestamps, ${epochMs('r.created_at')} as created_ms,
              extract(epoch from now() - r.updated_at)::float8 as idle_seconds, r.queue_state
         from runs r join organizations o on o.id = r.organization_id order by r.created_at, r.id`,
    )
  ).filter((run) => !wanted || wanted.has(run.id));
  if (wanted) for (const id of wanted) if (!runs.some((run) => run.id === id)) violations.push(`run ${id} does not exist`);
  counts.runs = runs.length;

  const stagesByRun = new Map<string, StageRow[]>();
  for (const stage of await query<StageRow>(
    `select id, run_id, stage, status, status_timestamps from task_stages order by run_id, stage`,
  )) {
    const list = stagesByRun.get(stage.run_id) ?? [];
    list.push(stage);
    stagesByRun.set(stage.run_id, list);
  }
  const resultsByStage = new Map<string, ResultRow[]>();
  for (const result of await query<ResultRow>(
    `select id, task_stage_id, task_id, workspace_task_id, stage, status, enforcement_level, status_timestamps,
            ${epochMs('created_at')} as created_ms,
            extract(epoch from progress_deadline - now())::float8 as progress_left,
            extract(epoch from hard_deadline - now())::float8 as hard_left
       from task_results order by task_stage_id, id`,
  )) {
    const list = resultsByStage.get(result.task_stage_id) ?? [];
    list.push(result);
    resultsByStage.set(result.task_stage_id, list);
  }

  const checkPlan = options.checkPlan ?? true;
  const associations = checkPlan
    ? await query<AssociationRow>(
        `select id, workspace_id, task_id, enforcement_level, stages, ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms
           from workspace_tasks order by created_at, id`,
      )
    : [];
  const tasks = checkPlan
    ? await query<TaskRow>(
        `select id, organization_id, name, url, enabled, global_enabled, global_stages, global_enforcement_level,
                ${epochMs('created_at')} as created_ms, ${epochMs('updated_at')} as updated_ms
           from run_tasks order by created_at, id`,
      )
    : [];
  const taskById = new Map(tasks.map((task) => [task.id, task]));

  const queue = options.queue;
  const queued = queue ? await queuedWork(queue.redis, `${queue.prefix}:${queue.queueName ?? 'runs'}`) : undefined;

  for (const run of runs) {
    const what = `run ${run.id} (${run.status})`;
    const stages = stagesByRun.get(run.id) ?? [];
    counts.stages += stages.length;
    const resultsOf = (stage: StageRow): ResultRow[] => resultsByStage.get(stage.id) ?? [];
    const allResults = stages.flatMap(resultsOf);
    counts.results += allResults.length;

    // INV-1/INV-2: the stages and results the run's associations call for, no more, no fewer.
    for (const stage of stages) {
      if (resultsOf(stage).length === 0) violations.push(`${what}: task stage ${stage.id} (${stage.stage}) has no results (INV-1)`);
      for (const result of resultsOf(stage))
        if (result.stage !== stage.stage)
          violations.push(`${what}: task result ${result.id} says stage ${result.stage} but belongs to the ${stage.stage} stage`);
    }
    if (checkPlan) {
      const createdMs = ms(run.created_ms);
      const attached = associations.filter((association) => association.workspace_id === run.workspace_id);
      const globals = run.global_entitled
        ? tasks.filter((task) => task.organization_id === run.organization_id && task.global_enabled)
        : [];
      const involvedTasks = new Set([...attached.map((a) => a.task_id), ...globals.map((t) => t.id), ...allResults.map((r) => r.task_id)]);
      const changedSince =
        attached.some((association) => ms(association.updated_ms) > createdMs) ||
        [...involvedTasks].some((id) => {
          const task = taskById.get(id);
          return !task || ms(task.updated_ms) > createdMs;
        }) ||
        allResults.some((result) => result.workspace_task_id !== null && !attached.some((a) => a.id === result.workspace_task_id));
      if (changedSince) {
        counts.planSkipped += 1;
      } else {
        counts.planChecked += 1;
        const workspaceTasks = attached
          .filter((association) => ms(association.created_ms) <= createdMs)
          .flatMap((association) => {
            const task = taskById.get(association.task_id);
            return task ? [toPlannable(task, association)] : [];
          });
        const planned = planTaskStages({
          workspaceTasks,
          globalTasks: globals.filter((task) => ms(task.created_ms) <= createdMs).map((task) => toPlannable(task, null)),
          speculative: run.plan_only,
        });
        const plannedStages = planned.map((p) => p.stage).sort();
        const actualStages = stages.map((s) => s.stage).sort();
        if (plannedStages.join() !== actualStages.join())
          violations.push(
            `${what}: task stages [${actualStages.join(', ')}], its associations call for [${plannedStages.join(', ')}] (INV-1)`,
          );
        for (const { stage, tasks: plannedTasks } of planned) {
          const row = stages.find((s) => s.stage === stage);
          if (!row) continue;
          const expected = plannedTasks.map((task) => task.taskId).sort();
          const actual = resultsOf(row)
            .map((result) => result.task_id)
            .sort();
          if (expected.join() !== actual.join())
            violations.push(`${what}: ${stage} results for tasks [${actual.join(', ')}], expected [${expected.join(', ')}] (INV-2)`);
        }
      }
    }

    // INV-6: timestamps present for the current status, set in order, from creation on.
    const runStamps = timestamps(what, run.status_timestamps, violations);
    const runCreated = Math.floor(ms(run.created_ms)) - 1;
    if (run.status !== 'pending' && !runStamps.has(statusTimestampKey(run.status)))
      violations.push(`${what}: no ${statusTimestampKey(run.status)} timestamp (INV-6)`);
    for (const [key, time] of runStamps) if (time < runCreated) violations.push(`${what}: ${key} is before the run was created (INV-6)`);
    const stageSnapshots: StageSnapshot[] = [];
    for (const stage of stages) {
      const results = resultsOf(stage);
      const stageWhat = `${what}: task stage ${stage.id} (${stage.stage}, ${stage.status})`;
      const stamps = timestamps(stageWhat, stage.status_timestamps, violations);
      if (stage.status !== 'pending' && !stamps.has(statusTimestampKey(stage.status)))
        violations.push(`${stageWhat}: no ${statusTimestampKey(stage.status)} timestamp (INV-6)`);
      const running = stamps.get('running-at');
      const final = FINAL_STAGE_STATUSES.has(stage.status) ? stamps.get(statusTimestampKey(stage.status)) : undefined;
      if (running !== undefined && final !== undefined && running > final)
        violations.push(`${stageWhat}: running-at is after ${statusTimestampKey(stage.status)} (INV-6)`);

      const evaluation = evaluateStage(
        stage.stage,
        results.map((result) => ({ status: result.status, enforcementLevel: result.enforcement_level })),
      );
      const overridden = 'awaiting-override-at' in (stage.status_timestamps ?? {});
      // INV-5: a final stage's status is what its results say (an override passes it; a cancel cancels it).
      if (FINAL_STAGE_STATUSES.has(stage.status)) {
        const runStopped = run.status === 'canceled' || run.status === 'discarded';
        if (stage.status === 'canceled') {
          if (!runStopped && evaluation?.status !== 'canceled') violations.push(`${stageWhat}: canceled, but its run was not (INV-5)`);
        } else if (!evaluation) {
          violations.push(`${stageWhat}: final while some of its results are still open (INV-5)`);
        } else if (stage.status === 'passed' && overridden) {
          // Passed by an override, whatever its results said.
        } else if (evaluation.status !== stage.status) {
          violations.push(`${stageWhat}: its results evaluate to ${evaluation.status} (INV-5)`);
        }
      } else if (stage.status === 'awaiting_override' && (!evaluation || evaluation.status === 'passed')) {
        violations.push(`${stageWhat}: awaiting an override, but its results evaluate to ${evaluation?.status ?? 'open'} (INV-5)`);
      }
      stageSnapshots.push({
        stage: stage.stage,
        status: stage.status,
        overridden: stage.status === 'running' && overridden,
        evaluation,
      });

      for (const result of results) {
        const resultWhat = `${what}: task result ${result.id} (${stage.stage}, ${result.status})`;
        const resultStamps = timestamps(resultWhat, result.status_timestamps, violations);
        if (result.status !== 'pending' && !resultStamps.has(statusTimestampKey(result.status)))
          violations.push(`${resultWhat}: no ${statusTimestampKey(result.status)} timestamp (INV-6)`);
        const resultRunning = resultStamps.get('running-at');
        const resultFinal = FINAL_RESULT_STATUSES.has(result.status) ? resultStamps.get(statusTimestampKey(result.status)) : undefined;
        if (resultRunning !== undefined && resultFinal !== undefined && resultRunning > resultFinal)
          violations.push(`${resultWhat}: running-at is after ${statusTimestampKey(result.status)} (INV-6)`);
        const resultCreated = Math.floor(ms(result.created_ms)) - 1;
        for (const [key, time] of resultStamps)
          if (time < resultCreated) violations.push(`${resultWhat}: ${key} is before the result was created (INV-6)`);
      }
    }

    // INV-3/INV-4: every run is final, waits for a person by design, or waits on something that will move it.
    const step = nextRunStep(
      { status: run.status, planOnly: run.plan_only, autoApply: run.auto_apply, overridesEnabled: run.overrides_enabled },
      stageSnapshots,
    );
    const open = allResults.filter((result) => !FINAL_RESULT_STATUSES.has(result.status));
    counts.openResults += open.length;
    const stageOf = (result: ResultRow): StageRow | undefined => stages.find((stage) => stage.id === result.task_stage_id);
    const isFinal = step.kind === 'wait' && FINAL_RUN_STATUSES.has(run.status);
    if (run.queue_state === 'queued' && run.status === 'pending') {
      // INV-12 (queue-invariants.ts) judges it: it may not move until admitted.
      counts.waitingInQueue += 1;
    } else if (isFinal) {
      counts.final += 1;
    } else if (step.kind === 'wait' && run.status.endsWith('_awaiting_decision')) {
      counts.awaitingDecision += 1;
    } else if (step.kind === 'wait' && (run.status === 'planned' || run.status === 'post_plan_completed')) {
      counts.awaitingConfirmation += 1;
    } else if (step.kind === 'wait' && run.status.endsWith('_running')) {
      counts.waitingOnTasks += 1;
      const current = stages.find((stage) => `${stage.stage}_running` === run.status);
      if (!current || current.status !== 'running' || !open.some((result) => result.task_stage_id === current.id))
        violations.push(`${what}: waits on its tasks, but no result of a running stage is open (INV-4)`);
    } else if (step.kind === 'wait') {
      violations.push(`${what}: waits with nothing that will move it (INV-4)`);
    } else {
      counts.moving += 1;
      const expected = unpublishedFor.has(run.id) || queued?.runIds.has(run.id) || Number(run.idle_seconds) <= grace;
      if (options.quiescent || !expected)
        violations.push(
          `${what}: not final nor waiting (next step: ${step.kind}${'status' in step ? ` ${step.status}` : ''}${'stage' in step ? ` ${step.stage}` : ''}), idle ${Number(run.idle_seconds).toFixed(1)} s${expected ? '' : ', with no pending event'} (INV-4)`,
        );
    }
    for (const result of open) {
      const stage = stageOf(result);
      const resultWhat = `${what}: task result ${result.id} (${result.stage}, ${result.status})`;
      if (result.status === 'pending') {
        // Pending is fine in a stage that has not started (or never will: the run stopped earlier).
        if (stage && stage.status !== 'pending') violations.push(`${resultWhat}: still pending in a ${stage.status} stage (INV-3)`);
        continue;
      }
      if (isFinal) {
        violations.push(`${resultWhat}: still running although its run is final (INV-3)`);
        continue;
      }
      const progressLeft = seconds(result.progress_left);
      const hardLeft = seconds(result.hard_left);
      if (progressLeft === null || hardLeft === null) {
        violations.push(`${resultWhat}: running without a progress or hard deadline (INV-3)`);
      } else if (Math.min(progressLeft, hardLeft) < -grace) {
        violations.push(
          `${resultWhat}: its deadline passed ${(-Math.min(progressLeft, hardLeft)).toFixed(1)} s ago (INV-3: grace ${grace} s)`,
        );
      }
    }
  }

  violations.push(...(await queueViolations(query, grace)));

  // INV-10: no secret in what BullMQ keeps in Redis.
  if (queue) {
    const values = await queueValues(queue.redis, `${escapeGlob(queue.prefix)}:${escapeGlob(queue.queueName ?? 'runs')}:*`);
    counts.queueKeysScanned = values.size;
    const known = (options.secrets ?? []).filter((secret) => secret.length > 0);
    for (const [key, items] of values) {
      for (const item of items) {
        for (const [label, pattern] of TOKEN_PATTERNS) if (pattern.test(item)) violations.push(`redis key ${key}: holds ${label} (INV-10)`);
        for (const secret of known)
          if (item.includes(secret)) violations.push(`redis key ${key}: holds a secret value given in options.secrets (INV-10)`);
      }
    }
  }

  return { violations: [...new Set(violations)], counts };
}

/** Asserts that no invariant is broken; the failure message lists every violation. Returns the counts. */
export async function expectNoViolations(source: InvariantSource, options: InvariantOptions = {}): Promise<InvariantCounts> {
  const report = await checkInvariants(source, options);
  // Imported here, not at the top: scripts/soak.ts runs checkInvariants outside Jest, where @jest/globals throws.
  const { expect } = await import('@jest/globals');
  expect(report.violations).toEqual([]);
  return report.counts;
}
