/**
 * The guarded lean reference's API: the lean reference's (bench/lean/api.ts), Koa and raw `pg`, with
 * the service's guarantees kept the cheapest way we know (docs/benchmarks.md, "What the guarantees cost on their own"):
 *
 * - `POST /api/v2/runs` writes the run, its `created` event and its `run.start` outbox row in one
 *   statement, then publishes the row (guarded-outbox.ts).
 * - `PATCH /api/v2/task-results/:id/callback` is authorized by the result's own token (derived from its
 *   id, checked in constant time) and is one statement: the result takes its verdict only while open and
 *   within its deadlines, its stage counts it (the stage row's lock orders simultaneous verdicts, so
 *   exactly one sees zero), and that one writes the stage's `stage.complete` outbox row, published after
 *   commit. `running` moves the progress deadline on.
 *
 * No validation beyond what the statements need, no logging. Started by the harness (bench/lib/stack.ts);
 * never part of the service.
 */
import Router from '@koa/router';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import Koa from 'koa';
import pg from 'pg';
import { answerCreated, jsonBody, runToCreate, type Body } from './common.ts';
import { required } from './env.ts';
import { publish, type OutboxEvent } from './guarded-outbox.ts';
import { tokenMatches } from './guarded-token.ts';
import { GUARDED_DEADLINES } from './guarded-schema.ts';

const pool = new pg.Pool({ connectionString: required('DATABASE_URL'), max: 10 });
const connection = new Redis(required('REDIS_URL'), { maxRetriesPerRequest: null });
const queue = new Queue('lean', { connection, prefix: required('QUEUE_PREFIX') });
const hmacKey = required('LEAN_HMAC_KEY');
const router = new Router();

router.get('/readyz', (ctx) => {
  ctx.body = 'ok';
});

router.post('/api/v2/runs', async (ctx) => {
  const run = await runToCreate(ctx);
  if (!run) return;
  const { id, workspaceId, message } = run;
  const { rows } = await pool.query<OutboxEvent>({
    name: 'guarded-create',
    text: `with run as (insert into lean_guarded.runs (id, workspace_id, message) values ($1, $2, $3) returning id),
       created as (insert into lean_guarded.run_events (run_id, action, actor) select id, 'created', 'bench' from run)
     insert into lean_guarded.outbox (topic, aggregate_id) select 'run.start', id from run returning id, topic, aggregate_id`,
    values: [id, workspaceId, message],
  });
  await publish(pool, queue, rows);
  answerCreated(ctx, run);
});

const WITHIN_DEADLINES = `(r.progress_deadline is null or r.progress_deadline > now()) and (r.hard_deadline is null or r.hard_deadline > now())`;

router.patch('/api/v2/task-results/:id/callback', async (ctx) => {
  const resultId = ctx.params['id'] ?? '';
  const token = (ctx.get('authorization').match(/^Bearer (.+)$/) ?? [])[1] ?? '';
  if (!tokenMatches(hmacKey, resultId, token)) {
    ctx.status = 401;
    return;
  }
  const body = (await jsonBody(ctx)) as Body;
  const status = body.data?.attributes?.['status'];
  const message = String(body.data?.attributes?.['message'] ?? '');
  if (status === 'running') {
    const moved = await pool.query({
      name: 'guarded-progress',
      text: `update lean_guarded.results r set message = $2, updated_at = now(),
               progress_deadline = least(now() + make_interval(secs => ${GUARDED_DEADLINES.progressSeconds}), r.hard_deadline)
             where r.id = $1 and r.status = 'running' and ${WITHIN_DEADLINES}`,
      values: [resultId, message],
    });
    ctx.status = moved.rowCount === 1 ? 200 : 409;
    return;
  }
  if (status !== 'passed' && status !== 'failed') {
    ctx.status = 422;
    return;
  }
  const { rows } = await pool.query<OutboxEvent & { ended: boolean }>({
    name: 'guarded-verdict',
    text: `with ended as (
         update lean_guarded.results r set status = $2, message = $3, updated_at = now()
          where r.id = $1 and r.status in ('pending', 'running') and ${WITHIN_DEADLINES}
         returning r.stage_id),
       counted as (
         update lean_guarded.stages s set open_results = s.open_results - 1 from ended
          where s.id = ended.stage_id
         returning s.id, s.open_results),
       woken as (
         insert into lean_guarded.outbox (topic, aggregate_id) select 'stage.complete', counted.id from counted where counted.open_results = 0
         returning id, topic, aggregate_id)
     select woken.id, woken.topic, woken.aggregate_id, true as ended from woken
     union all select null, null, null, true from ended where not exists (select 1 from woken)`,
    values: [resultId, status, message],
  });
  if (rows.length === 0) {
    ctx.status = 409;
    return;
  }
  await publish(
    pool,
    queue,
    rows.filter((row) => row.id !== null),
  );
  ctx.status = 200;
});

const app = new Koa();
app.use(router.routes());
const server = app.listen(Number(required('PORT')), '127.0.0.1');
server.keepAliveTimeout = 60_000;

process.on('SIGTERM', () => {
  server.close();
  void Promise.all([queue.close(), pool.end()]).finally(() => process.exit(0));
});
