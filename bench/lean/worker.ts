/**
 * The lean reference's worker (docs/benchmarks.md): BullMQ at concurrency 50,
 * raw `pg`, undici.
 *
 * - `run.start` inserts the run's stages and task results in one transaction (the first stage's
 *   already running), then dispatches the first stage.
 * - `stage.complete` marks the stage passed, then starts and dispatches the next stage or marks
 *   the run applied.
 * - Dispatch builds the HCP-shaped payload, signs it (HMAC-SHA512, `X-TFC-Task-Signature`) and POSTs
 *   it to the task server.
 *
 * Every task is mandatory and every callback is trusted: no enforcement, no overrides, no retries,
 * no deadlines. Started by the harness (bench/lib/stack.ts); never part of the service.
 */
import { Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { required } from './env.ts';
import { newId, postSigned, taskPayload, type PayloadRun, workerSetup } from './common.ts';
import { LEAN_STAGES } from './schema.ts';

const { pool, agent, tasksPerStage, taskUrl, hmacKey, apiUrl } = workerSetup();

type RunRow = PayloadRun;

async function dispatch(run: RunRow, stage: string, resultIds: readonly string[]): Promise<void> {
  await Promise.all(
    resultIds.map((resultId) =>
      postSigned(agent, taskUrl, hmacKey, taskPayload(apiUrl, run, stage, resultId, randomBytes(24).toString('base64url'))),
    ),
  );
}

async function startRun(runId: string): Promise<void> {
  const stageIds = LEAN_STAGES.map(() => newId('ts'));
  const results = stageIds.flatMap((stageId, ordinal) =>
    Array.from({ length: tasksPerStage }, () => ({ id: newId('taskrs'), stageId, first: ordinal === 0 })),
  );
  const client = await pool.connect();
  let run: RunRow | undefined;
  try {
    await client.query('begin');
    run = (
      await client.query<RunRow>({
        name: 'lean-run',
        text: 'select id, workspace_id, message, created_at from lean.runs where id = $1',
        values: [runId],
      })
    ).rows[0];
    if (!run) throw new Error(`run ${runId} not found`);
    await client.query({
      name: 'lean-stages',
      text: `insert into lean.stages (id, run_id, stage, ordinal, status)
             select id, $2, stage, ordinal, case when ordinal = 1 then 'running' else 'pending' end
               from unnest($1::text[], $3::text[]) with ordinality as s(id, stage, ordinal)`,
      values: [stageIds, runId, [...LEAN_STAGES]],
    });
    await client.query({
      name: 'lean-results',
      text: `insert into lean.results (id, stage_id, run_id, task_url, status)
             select id, stage_id, $3, $4, case when first then 'running' else 'pending' end
               from unnest($1::text[], $2::text[], $5::boolean[]) as r(id, stage_id, first)`,
      values: [
        results.map((result) => result.id),
        results.map((result) => result.stageId),
        runId,
        taskUrl,
        results.map((result) => result.first),
      ],
    });
    await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
  await dispatch(
    run,
    LEAN_STAGES[0],
    results.filter((result) => result.first).map((result) => result.id),
  );
}

async function completeStage(stageId: string): Promise<void> {
  const passed = await pool.query<{ run_id: string; ordinal: number }>({
    name: 'lean-stage-passed',
    text: `update lean.stages set status = 'passed' where id = $1 and status = 'running' returning run_id, ordinal`,
    values: [stageId],
  });
  const stage = passed.rows[0];
  if (!stage) return; // already completed (a duplicate job)
  if (stage.ordinal < LEAN_STAGES.length) {
    const next = await pool.query<RunRow & { result_id: string; stage: string }>({
      name: 'lean-next-stage',
      text: `with next as (update lean.stages set status = 'running' where run_id = $1 and ordinal = $2 returning id, stage)
             update lean.results r set status = 'running' from next, lean.runs run
              where r.stage_id = next.id and run.id = $1
             returning r.id as result_id, next.stage, run.id, run.workspace_id, run.message, run.created_at`,
      values: [stage.run_id, stage.ordinal + 1],
    });
    const first = next.rows[0];
    if (first)
      await dispatch(
        first,
        first.stage,
        next.rows.map((row) => row.result_id),
      );
    return;
  }
  await pool.query({
    name: 'lean-applied',
    text: `update lean.runs set status = 'applied', applied_at = clock_timestamp() where id = $1`,
    values: [stage.run_id],
  });
}

const connection = new Redis(required('REDIS_URL'), { maxRetriesPerRequest: null });
const worker = new Worker(
  'lean',
  async (job: Job<{ runId?: string; stageId?: string }>) => {
    if (job.name === 'run.start' && job.data.runId) await startRun(job.data.runId);
    else if (job.name === 'stage.complete' && job.data.stageId) await completeStage(job.data.stageId);
  },
  { connection, prefix: required('QUEUE_PREFIX'), concurrency: 50 },
);
await worker.waitUntilReady();
process.send?.({ ready: true });

process.on('SIGTERM', () => {
  void Promise.all([worker.close(), pool.end(), agent.close()]).finally(() => process.exit(0));
});
