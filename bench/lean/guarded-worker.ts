/**
 * The guarded lean reference's worker: the lean reference's (bench/lean/worker.ts), BullMQ at
 * concurrency 50, raw `pg`, undici, with the service's guarantees kept the cheapest way we know
 * (docs/benchmarks.md, "What the guarantees cost on their own"):
 *
 * - `run.start` inserts the run's stages and results in one transaction, the first stage's results
 *   started: running, leased (attempts 1, next_attempt_at), their deadlines set, and each attempt's
 *   row written before its POST. Then the POSTs, and one statement fills in their attempts' rows and
 *   acknowledges the results.
 * - `stage.complete` (published from the outbox by the verdict that closed the stage) marks the stage
 *   passed and, in the same statement, starts the next stage's results as above, or marks the run applied.
 *
 * Every task is mandatory and every verdict `passed` in the benchmark, so enforcement is the stage's
 * end. Started by the harness (bench/lib/stack.ts); never part of the service.
 */
import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { newId, postSigned, taskPayload, workerSetup } from './common.ts';
import { required } from './env.ts';
import { resultToken } from './guarded-token.ts';
import { GUARDED_DEADLINES } from './guarded-schema.ts';
import { LEAN_STAGES } from './schema.ts';

const { pool, agent, tasksPerStage, taskUrl, hmacKey, apiUrl } = workerSetup();
const { progressSeconds, hardSeconds, leaseSeconds } = GUARDED_DEADLINES;

/** What a started result's payload needs, as the starting statements return it. */
interface Started {
  result_id: string;
  stage: string;
  run_id: string;
  workspace_id: string;
  message: string;
  created_at: Date;
}

/** The SET list that starts a result: running, leased for its first attempt, its deadlines from now. */
const START = `status = 'running', attempts = r.attempts + 1, next_attempt_at = now() + make_interval(secs => ${leaseSeconds}),
  progress_deadline = now() + make_interval(secs => ${progressSeconds}), hard_deadline = now() + make_interval(secs => ${hardSeconds}),
  updated_at = now()`;

/** Each started result's attempt row, written in the statement that claims the attempt, before its POST. */
const RECORD_ATTEMPTS = `attempts_written as (
  insert into lean_guarded.attempts (result_id, attempt, started_at, error_kind) select result_id, 1, now(), 'unrecorded' from started)`;

/** POSTs the started results, then records their answers and acknowledges them in one statement. */
async function dispatch(started: readonly Started[]): Promise<void> {
  const answers = await Promise.all(
    started.map(async (row) => {
      const begun = performance.now();
      const run = { id: row.run_id, workspace_id: row.workspace_id, message: row.message, created_at: row.created_at };
      const status = await postSigned(
        agent,
        taskUrl,
        hmacKey,
        taskPayload(apiUrl, run, row.stage, row.result_id, resultToken(hmacKey, row.result_id)),
      );
      return { id: row.result_id, status, ms: Math.round(performance.now() - begun) };
    }),
  );
  await pool.query({
    name: 'guarded-acknowledge',
    text: `with given as (select * from unnest($1::text[], $2::int[], $3::int[]) as g(result_id, http_status, duration_ms)),
       filled as (
         update lean_guarded.attempts a set http_status = g.http_status, duration_ms = g.duration_ms, error_kind = null
           from given g where a.result_id = g.result_id and a.attempt = 1)
       update lean_guarded.results r set acknowledged_at = now(), next_attempt_at = null
         from given g where r.id = g.result_id and g.http_status = 200 and r.status = 'running'`,
    values: [answers.map((answer) => answer.id), answers.map((answer) => answer.status), answers.map((answer) => answer.ms)],
  });
}

async function startRun(runId: string): Promise<void> {
  const stageIds = LEAN_STAGES.map(() => newId('ts'));
  const results = stageIds.flatMap((stageId, ordinal) =>
    Array.from({ length: tasksPerStage }, (_, index) => ({ id: newId('taskrs'), stageId, first: ordinal === 0, name: `task-${index}` })),
  );
  const { rows } = await pool.query<Started>({
    name: 'guarded-start-run',
    text: `with run as (select id, workspace_id, message, created_at from lean_guarded.runs where id = $1 and status = 'pending'),
       stages as (
         insert into lean_guarded.stages (id, run_id, stage, ordinal, status, open_results)
         select s.id, run.id, s.stage, s.ordinal, case when s.ordinal = 1 then 'running' else 'pending' end, $6
           from run, unnest($2::text[], $3::text[]) with ordinality as s(id, stage, ordinal)
         returning id, stage, ordinal),
       planned as (
         insert into lean_guarded.results (id, stage_id, run_id, task_name, task_url, enforcement_level, status)
         select p.id, p.stage_id, run.id, p.name, $5, 'mandatory', 'pending'
           from run, unnest($4::text[], $7::text[], $8::text[]) as p(id, stage_id, name)
         returning id),
       started as (
         insert into lean_guarded.results (id, stage_id, run_id, task_name, task_url, enforcement_level, status, attempts,
                                          next_attempt_at, progress_deadline, hard_deadline, updated_at)
         select p.id, p.stage_id, run.id, p.name, $5, 'mandatory', 'running', 1, now() + make_interval(secs => ${leaseSeconds}),
                now() + make_interval(secs => ${progressSeconds}), now() + make_interval(secs => ${hardSeconds}), now()
           from run, unnest($9::text[], $10::text[], $11::text[]) as p(id, stage_id, name)
         returning id as result_id),
       ${RECORD_ATTEMPTS},
       running as (update lean_guarded.runs set status = 'pre_plan_running', version = version + 1 where id = (select id from run))
     select started.result_id, $12::text as stage, run.id as run_id, run.workspace_id, run.message, run.created_at from started, run`,
    values: [
      runId,
      stageIds,
      [...LEAN_STAGES],
      results.filter((result) => !result.first).map((result) => result.id),
      taskUrl,
      tasksPerStage,
      results.filter((result) => !result.first).map((result) => result.stageId),
      results.filter((result) => !result.first).map((result) => result.name),
      results.filter((result) => result.first).map((result) => result.id),
      results.filter((result) => result.first).map((result) => result.stageId),
      results.filter((result) => result.first).map((result) => result.name),
      LEAN_STAGES[0],
    ],
  });
  await dispatch(rows);
}

async function completeStage(stageId: string): Promise<void> {
  // One statement: the stage passes (once: a duplicate job finds it passed), and the next one starts with
  // its results leased and their attempts recorded, or the run is applied.
  const { rows } = await pool.query<Started>({
    name: 'guarded-complete-stage',
    text: `with passed as (
         update lean_guarded.stages set status = 'passed' where id = $1 and status = 'running' and open_results = 0
         returning run_id, ordinal),
       next_stage as (
         update lean_guarded.stages s set status = 'running' from passed
          where s.run_id = passed.run_id and s.ordinal = passed.ordinal + 1 and s.status = 'pending'
         returning s.id, s.stage),
       started as (
         update lean_guarded.results r set ${START} from next_stage
          where r.stage_id = next_stage.id and r.status = 'pending'
         returning r.id as result_id, next_stage.stage, r.run_id),
       ${RECORD_ATTEMPTS},
       applied as (
         update lean_guarded.runs set status = 'applied', applied_at = clock_timestamp(), version = version + 1
          where id = (select run_id from passed) and not exists (select 1 from lean_guarded.stages s, passed
                        where s.run_id = passed.run_id and s.ordinal > passed.ordinal))
     select started.result_id, started.stage, run.id as run_id, run.workspace_id, run.message, run.created_at
       from started join lean_guarded.runs run on run.id = started.run_id`,
    values: [stageId],
  });
  if (rows.length > 0) await dispatch(rows);
}

const connection = new Redis(required('REDIS_URL'), { maxRetriesPerRequest: null });
const worker = new Worker(
  'lean',
  async (job: Job<{ id?: string }>) => {
    if (!job.data.id) return;
    if (job.name === 'run.start') await startRun(job.data.id);
    else if (job.name === 'stage.complete') await completeStage(job.data.id);
  },
  { connection, prefix: required('QUEUE_PREFIX'), concurrency: 50 },
);
await worker.waitUntilReady();
process.send?.({ ready: true });

process.on('SIGTERM', () => {
  void Promise.all([worker.close(), pool.end(), agent.close()]).finally(() => process.exit(0));
});
