/**
 * The lean reference's API (docs/benchmarks.md), measured in the same run as the
 * project so the targets, which were set from it on another machine, can be read on this one.
 * Koa and raw `pg`, no auth, no validation beyond what routing needs, no logging, no retries:
 *
 * - `POST /api/v2/runs` inserts the run and adds a `run.start` job.
 * - `PATCH /api/v2/task-results/:id/callback` closes the result; when its stage has no open result
 *   left, it adds that stage's `stage.complete` job (deduplicated by job id).
 * - H3's reads, on the project's tables (bench/lean/reads.ts).
 *
 * Started by the harness (bench/lib/stack.ts); never part of the service.
 */
import Router from '@koa/router';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import Koa from 'koa';
import pg from 'pg';
import { answerCreated, jsonBody, runToCreate, type Body } from './common.ts';
import { required } from './env.ts';
import { mountLeanReads } from './reads.ts';

const pool = new pg.Pool({ connectionString: required('DATABASE_URL'), max: 10 });
const connection = new Redis(required('REDIS_URL'), { maxRetriesPerRequest: null });
const queue = new Queue('lean', { connection, prefix: required('QUEUE_PREFIX') });
const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: 1000 } as const;
const router = new Router();

router.get('/readyz', (ctx) => {
  ctx.body = 'ok';
});

router.post('/api/v2/runs', async (ctx) => {
  const run = await runToCreate(ctx);
  if (!run) return;
  const { id, workspaceId, message } = run;
  await pool.query({
    name: 'lean-create',
    text: 'insert into lean.runs (id, workspace_id, message) values ($1, $2, $3)',
    values: [id, workspaceId, message],
  });
  await queue.add('run.start', { runId: id }, JOB_OPTIONS);
  answerCreated(ctx, run);
});

router.patch('/api/v2/task-results/:id/callback', async (ctx) => {
  const body = (await jsonBody(ctx)) as Body;
  const status = body.data?.attributes?.['status'];
  if (status !== 'passed' && status !== 'failed') {
    ctx.status = status === 'running' ? 200 : 422;
    return;
  }
  const closed = await pool.query<{ stage_id: string }>({
    name: 'lean-callback',
    text: `update lean.results set status = $2, message = $3, updated_at = clock_timestamp() where id = $1 and status = 'running' returning stage_id`,
    values: [ctx.params['id'], status, String(body.data?.attributes?.['message'] ?? '')],
  });
  const stageId = closed.rows[0]?.stage_id;
  // Counted after this result's own commit: of two callbacks closing a stage's last results at once,
  // at least one sees the other's commit, so the stage is always completed (the job id dedupes).
  if (stageId) {
    const open = await pool.query<{ open: number }>({
      name: 'lean-open',
      text: `select count(*)::int as open from lean.results where stage_id = $1 and status in ('pending', 'running')`,
      values: [stageId],
    });
    if (open.rows[0]?.open === 0) await queue.add('stage.complete', { stageId }, { ...JOB_OPTIONS, jobId: `complete-${stageId}` });
  }
  ctx.status = 200;
});

mountLeanReads(router, pool);

const app = new Koa();
app.use(router.routes());
const server = app.listen(Number(required('PORT')), '127.0.0.1');
server.keepAliveTimeout = 60_000;

process.on('SIGTERM', () => {
  server.close();
  void Promise.all([queue.close(), pool.end()]).finally(() => process.exit(0));
});
