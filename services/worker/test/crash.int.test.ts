import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { JOBS, QUEUES, runCreatedJobId } from '@runtasks/shared/queue';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import pg from 'pg';
import {
  apiAgainst,
  checkLedgers,
  createRuns,
  harness,
  inFlightPosts,
  invariants,
  notApplied,
  onCleanup,
  privatePostgres,
  privateRedis,
  redisClient,
  runCleanups,
  serverErrorsBut503,
  setUpWorkload,
  statusCounts,
  TASKS_PER_RUN,
  waitUntilAllFinal,
  watchStatuses,
  WorkerFleet,
  workerEnv,
} from '../../../test/support/cluster.ts';
import { api, eventually } from '../../../test/support/fixtures.ts';
import { freePort } from '../../../test/support/processes.ts';

/**
 * Crash tests: worker processes killed with SIGKILL under
 * load, Redis killed and restarted empty, PostgreSQL stopped with `-m immediate` and restarted. Each
 * ends, once the system is quiet, with the "nothing lost" invariants (test/support/invariants.ts), the
 * task servers' ledgers, and no HTTP 5xx other than 503. Everything runs on loopback; Redis and
 * PostgreSQL faults use private instances on their own ports, never the shared ones.
 */

const REPORT_FILE = new URL('../../../test-results/crash-report.json', import.meta.url).pathname;

// The counts of every scenario end up in test-results/crash-report.json.
const startedAt = Date.now();
const report: { generatedAt?: string; durationMs?: number; scenarios: Record<string, Record<string, unknown>> } = { scenarios: {} };
async function writeReport(): Promise<void> {
  report.generatedAt = new Date().toISOString();
  report.durationMs = Date.now() - startedAt;
  await mkdir(dirname(REPORT_FILE), { recursive: true });
  await writeFile(REPORT_FILE, `${JSON.stringify(report, null, 2)}\n`);
}

// ---------------------------------------------------------------------------------------------

describe('crash tests: nothing is lost when processes and backing services die', () => {
  afterEach(runCleanups, 120_000);
  afterAll(async () => {
    await runCleanups();
    await writeReport();
  }, 120_000);

  it('kill -9 of workers while they materialize runs and dispatch results, under 210 runs × 3 tasks', async () => {
    const testStarted = Date.now();
    const h = await harness({ TASK_PROGRESS_TIMEOUT_SECONDS: '45' });
    const statuses = watchStatuses(h.server);
    // Slow acknowledgements keep POSTs in flight, so a kill lands in the middle of some.
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'crash-kill', 'slow:300');
    const redis = redisClient(h.config.redisUrl);
    const activeKey = `${h.config.queuePrefix}:${QUEUES.runs}:active`;
    const fleet = new WorkerFleet(workerEnv(h));
    await Promise.all([fleet.start().started, fleet.start().started]);

    const runIds: string[] = [];
    const kills: { phase: string; victim: string; inFlightPosts: number; orphanedJobs: Record<string, number> }[] = [];
    const hits = { materialize: 0, dispatch: 0 };
    /** Jobs earlier victims left active: not counted again. */
    const orphaned = new Set<string>();

    /**
     * SIGKILL the oldest live worker, run `afterKill`, start a replacement, and name the jobs the victim
     * left active.
     */
    async function killOne(phase: 'materialize' | 'dispatch', afterKill?: () => Promise<void>): Promise<void> {
      const [victim] = fleet.live();
      if (!victim) throw new Error('no live worker to kill');
      const activeBefore = (await redis.lrange(activeKey, 0, -1)).filter((job) => !orphaned.has(job));
      const inFlight = inFlightPosts(servers);
      await fleet.kill9(victim);
      await afterKill?.();
      const replacement = fleet.start();
      await replacement.started;
      // The survivors finished their own jobs long ago (≤ 300 ms each); the victim's stay active until BullMQ's stall check.
      const activeNow = new Set(await redis.lrange(activeKey, 0, -1));
      const orphanedJobs: Record<string, number> = {};
      for (const id of activeBefore.filter((job) => activeNow.has(job))) {
        orphaned.add(id);
        const kind = id.split('.')[0] ?? id;
        orphanedJobs[kind] = (orphanedJobs[kind] ?? 0) + 1;
      }
      // First deliveries happen inside the run jobs that start their stages (retries in task-dispatch
      // jobs): in the dispatch phase, jobs left active while POSTs were in flight were delivering.
      const victimHeldJobs = Object.keys(orphanedJobs).length > 0;
      if (phase === 'materialize' && (orphanedJobs['run-created'] || orphanedJobs['run-advance'])) hits.materialize += 1;
      if (phase === 'dispatch' && victimHeldJobs && inFlight > 0) hits.dispatch += 1;
      kills.push({ phase, victim: victim.name, inFlightPosts: inFlight, orphanedJobs });
    }

    const activeRunCreated = async (): Promise<number> =>
      (await redis.lrange(activeKey, 0, -1)).filter((job) => !orphaned.has(job) && job.startsWith('run-created.')).length;
    const queue = new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix });
    onCleanup(() => queue.close(), 'queue');
    /**
     * Makes the burst's materializations wait, mid-statement, in both workers: the queue is paused
     * while the runs are created, their rows are locked, and then the queue resumes. Each run-created
     * job then stays active on its run's lock until `release`, so a kill is sure to catch some of the
     * victim's.
     */
    const holdMaterialization = async (create: () => Promise<string[]>): Promise<() => Promise<void>> => {
      await queue.pause();
      const client = new pg.Client({ connectionString: h.config.databaseUrl });
      let released = false;
      const release = async (): Promise<void> => {
        if (released) return;
        released = true;
        await queue.resume();
        await client.query('commit').catch(() => undefined);
        await client.end();
      };
      try {
        await client.connect();
        const ids = await create();
        await client.query('begin');
        await client.query('select id from runs where id = any($1) for update', [ids]);
        await queue.resume();
        return release;
      } catch (error) {
        await release();
        throw error;
      }
    };
    const BURSTS = 7;
    const PER_BURST = 30;
    for (let burst = 0; burst < BURSTS; burst += 1) {
      // Alternate, but keep aiming at a phase until a kill has actually caught a job of that kind.
      const target: 'materialize' | 'dispatch' | undefined =
        burst === BURSTS - 1 ? undefined : hits.materialize === 0 || (hits.dispatch > 0 && burst % 2 === 0) ? 'materialize' : 'dispatch';
      // To catch run-created jobs rather than deliveries, let the previous burst's POSTs drain first.
      if (target === 'materialize') await eventually(async () => (inFlightPosts(servers) === 0 ? true : undefined), 30_000, 20);
      const ids: string[] = [];
      const creating = target === 'materialize' ? undefined : createRuns(h, fixture, PER_BURST, 10, ids);
      creating?.catch(() => undefined);
      const release =
        target === 'materialize'
          ? await holdMaterialization(async () => (await createRuns(h, fixture, PER_BURST, 10, ids), ids))
          : undefined;
      try {
        // More than one worker's concurrency (16) is active: both workers hold some.
        if (target === 'materialize') await eventually(async () => ((await activeRunCreated()) > 16 ? true : undefined), 20_000, 5);
        if (target === 'dispatch') await eventually(async () => (inFlightPosts(servers) >= 6 ? true : undefined), 20_000, 5);
        if (target) await killOne(target, release);
      } finally {
        await release?.();
      }
      await creating;
      runIds.push(...ids);
    }
    expect(runIds).toHaveLength(BURSTS * PER_BURST);

    const final = await waitUntilAllFinal(h.orm, runIds.length, 60_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);
    report.scenarios['workerKill'] = {
      runs: runIds.length,
      tasksPerRun: TASKS_PER_RUN,
      kills: kills.length,
      killsCatchingMaterialize: hits.materialize,
      killsCatchingDispatch: hits.dispatch,
      killDetails: kills,
      finalStatuses: final,
      ledger: { ...ledger, violations: ledger.violations.slice(0, 20) },
      invariantViolations: check.violations.slice(0, 20),
      httpServerErrorsBut503: serverErrorsBut503(statuses),
      requestsAnsweredWithOther5xx: statuses.failures.slice(0, 20),
      unexpectedExits: fleet.unexpectedExits.length,
      invariantCounts: check.counts,
      violations: check.violations.length + ledger.violations.length,
      durationMs: Date.now() - testStarted,
    };
    await writeReport();

    expect(kills.length).toBeGreaterThanOrEqual(3);
    expect(hits.materialize).toBeGreaterThanOrEqual(1);
    expect(hits.dispatch).toBeGreaterThanOrEqual(1);
    // Every run went all the way: the crashes cost time, never a run.
    expect(await notApplied(h.orm)).toEqual([]);
    expect(final).toEqual({ applied: runIds.length });
    expect(ledger.violations).toEqual([]);
    expect(ledger.resultsPosted).toBe(runIds.length * TASKS_PER_RUN);
    expect(check.violations).toEqual([]);
    expect(check.counts).toMatchObject({
      runs: runIds.length,
      final: runIds.length,
      stages: runIds.length,
      results: runIds.length * TASKS_PER_RUN,
      planChecked: runIds.length,
    });
    expect(serverErrorsBut503(statuses)).toEqual({});
    expect(fleet.unexpectedExits).toEqual([]);
  }, 210_000);

  it('Redis killed mid-load and restarted empty: the outbox relay and the sweeper re-drive every run', async () => {
    const testStarted = Date.now();
    const redisServer = privateRedis(await freePort());
    await redisServer.start();
    const h = await harness({ REDIS_URL: redisServer.url, TASK_PROGRESS_TIMEOUT_SECONDS: '45' });
    const statuses = watchStatuses(h.server);
    // Slow acknowledgements and few worker slots: jobs queue up in Redis, so killing it loses some.
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'crash-redis', 'slow:200');
    const fleet = new WorkerFleet(workerEnv(h, { WORKER_CONCURRENCY: '2' }));
    await Promise.all([fleet.start().started, fleet.start().started]);
    const base = `${h.config.queuePrefix}:${QUEUES.runs}`;
    const withClient = async <T>(work: (client: Redis) => Promise<T>): Promise<T> => {
      const client = new Redis(redisServer.url, { maxRetriesPerRequest: 1 });
      client.on('error', () => undefined);
      try {
        return await work(client);
      } finally {
        client.disconnect();
      }
    };
    const backlog = (): Promise<number> =>
      withClient(async (client) => {
        const [waiting, delayed, prioritized] = await Promise.all([
          client.llen(`${base}:wait`),
          client.zcard(`${base}:delayed`),
          client.zcard(`${base}:prioritized`),
        ]);
        return waiting + delayed + prioritized;
      });
    const hasJob = (id: string): Promise<boolean> => withClient(async (client) => (await client.exists(`${base}:${id}`)) === 1);

    const before: string[] = [];
    await createRuns(h, fixture, 40, 8, before);
    // Mid-load: some runs are done while jobs for the others wait in Redis.
    const lostJobs = await eventually(
      async () => {
        const applied = (await statusCounts(h.orm))['applied'] ?? 0;
        const queued = await backlog();
        return applied >= 3 && queued >= 10 ? queued : undefined;
      },
      30_000,
      50,
    );
    const [firstRun = ''] = before;
    expect(await hasJob(runCreatedJobId(firstRun))).toBe(true);
    const logged = fleet.live().map((worker) => ({ worker, from: worker.messages.length }));
    await redisServer.kill();
    const downAt = Date.now();
    // An outage the workers noticed, not a blip: each has lost its connection before Redis comes back.
    await eventually(
      async () => (logged.every(({ worker, from }) => worker.messages.slice(from).includes('redis connection error')) ? true : undefined),
      15_000,
      50,
    );

    // Run creation never waits on Redis (this API, built without its operations, does not publish at
    // once either): runs are still created, fast, and their events wait in the outbox.
    const during: string[] = [];
    const latencies = await createRuns(h, fixture, 40, 4, during);
    const [{ n: unpublished } = { n: 0 }] = await h.orm.em
      .fork()
      .execute<{ n: string | number }[]>(`select count(*) as n from outbox_events where published_at is null`);
    const downtimeMs = Date.now() - downAt;
    // Same port, no persistence: back, and empty.
    await redisServer.start();
    expect(await hasJob(runCreatedJobId(firstRun))).toBe(false);

    const after: string[] = [];
    await createRuns(h, fixture, 10, 4, after);
    const total = before.length + during.length + after.length;
    const final = await waitUntilAllFinal(h.orm, total, 60_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const redis = redisClient(redisServer.url);
    // The workers re-created the sweeper's schedule in the new, empty Redis.
    const sweeper = await new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix }).getJobScheduler(JOBS.sweep);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);
    report.scenarios['redisRestart'] = {
      runs: total,
      runsCreatedWhileRedisDown: during.length,
      redisKills: 1,
      jobsQueuedWhenRedisDied: lostJobs,
      downtimeMs,
      unpublishedOutboxWhileDown: Number(unpublished),
      maxCreateLatencyWhileDownMs: Math.round(Math.max(...latencies)),
      sweeperRescheduled: sweeper !== undefined,
      finalStatuses: final,
      ledger: { ...ledger, violations: ledger.violations.slice(0, 20) },
      invariantViolations: check.violations.slice(0, 20),
      httpServerErrorsBut503: serverErrorsBut503(statuses),
      requestsAnsweredWithOther5xx: statuses.failures.slice(0, 20),
      unexpectedExits: fleet.unexpectedExits.length,
      invariantCounts: check.counts,
      violations: check.violations.length + ledger.violations.length,
      durationMs: Date.now() - testStarted,
    };
    await writeReport();

    expect(during).toHaveLength(40);
    expect(Math.max(...latencies)).toBeLessThan(5_000);
    // Redis was really gone: the runs created meanwhile could not be published.
    expect(Number(unpublished)).toBeGreaterThanOrEqual(during.length);
    expect(sweeper?.every).toBe(500);
    expect(await notApplied(h.orm)).toEqual([]);
    expect(final).toEqual({ applied: total });
    expect(ledger.violations).toEqual([]);
    expect(check.violations).toEqual([]);
    expect(check.counts).toMatchObject({ runs: total, final: total, results: total * TASKS_PER_RUN });
    expect(serverErrorsBut503(statuses)).toEqual({});
    expect(fleet.unexpectedExits).toEqual([]);
  }, 120_000);

  it('PostgreSQL stopped (-m immediate) mid-load: the API answers 503 JSON:API, then recovers, and runs complete', async () => {
    const testStarted = Date.now();
    const cluster = await privatePostgres();
    await cluster.start();
    const admin = new pg.Client({ connectionString: cluster.url('postgres') });
    await admin.connect();
    await admin.query('create database runtasks_crash');
    await admin.end();
    // A short progress timeout: results whose callback the outage swallowed end (errored) quickly.
    const env = { TASK_PROGRESS_TIMEOUT_SECONDS: '8' };
    const h = await apiAgainst(cluster.url('runtasks_crash'), env);
    const statuses = watchStatuses(h.server);
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'crash-pg', 'callback');
    const fleet = new WorkerFleet(workerEnv(h, env));
    await Promise.all([fleet.start().started, fleet.start().started]);

    const before: string[] = [];
    await createRuns(h, fixture, 40, 4, before);
    await eventually(async () => (((await statusCounts(h.orm))['applied'] ?? 0) >= 5 ? true : undefined), 30_000, 50);
    // A full pool of transactions in flight when PostgreSQL dies (the API's pool holds 5): each must give
    // its connection back, or the API never gets one again.
    const pool = await h.orm.em.getConnection().getNativeClient();
    let pgStopped: () => void = () => undefined;
    const stopping = new Promise<void>((resolve) => (pgStopped = resolve));
    let opened = 0;
    const straddling = Array.from({ length: 5 }, () =>
      h.orm.em.fork().transactional(async (tx) => {
        await tx.execute('select 1');
        opened += 1;
        await stopping;
        await tx.execute('select 1');
      }),
    );
    await eventually(async () => (opened === straddling.length ? true : undefined), 10_000, 5);
    const logged = fleet.live().map((worker) => ({ worker, from: worker.messages.length }));
    await cluster.stopImmediate();
    const downAt = Date.now();
    pgStopped();
    const straddled = await Promise.allSettled(straddling);
    expect(straddled.map((outcome) => outcome.status)).toEqual(straddling.map(() => 'rejected'));

    // Every DB-backed endpoint answers a JSON:API 503 with Retry-After, promptly; never a 500.
    const [someRun] = before;
    const probes = [
      () => api(h, 'get', `/runs/${someRun}`, fixture.organizationToken),
      () => api(h, 'get', `/workspaces/${fixture.workspaceId}/runs`, fixture.organizationToken),
      () => api(h, 'get', `/organizations/${fixture.organization}`, fixture.organizationToken),
      () =>
        api(h, 'post', '/runs', fixture.organizationToken, {
          data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: fixture.workspaceId } } } },
        }),
      () =>
        api(h, 'patch', `/task-results/taskrs-${randomAlphanumeric(16)}/callback`, `rtcb_${randomAlphanumeric(43)}`, {
          data: { type: 'task-results', attributes: { status: 'passed' } },
        }),
    ];
    const outage: { status: number; ms: number }[] = [];
    for (let round = 0; round < 3; round += 1) {
      for (const probe of probes) {
        const started = performance.now();
        const res = await probe();
        outage.push({ status: res.status, ms: performance.now() - started });
        expect(res.status).toBe(503);
        expect(res.headers['content-type']).toContain('application/vnd.api+json');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.body.errors).toEqual([expect.objectContaining({ status: '503' })]);
        expect(res.text).not.toMatch(/\n\s+at |ECONNREFUSED|postgres/i);
      }
    }
    // Not DB-backed: still served.
    expect((await api(h, 'get', '/ping')).status).toBe(204);
    // An outage the workers felt too: each lost its outbox listener's connection before PostgreSQL is back.
    await eventually(
      async () =>
        logged.every(({ worker, from }) => worker.messages.slice(from).includes('outbox listener connection lost; polling continues'))
          ? true
          : undefined,
      15_000,
      50,
    );
    await cluster.start();
    const downtimeMs = Date.now() - downAt;

    // The API recovers without a restart.
    const recoveredAt = Date.now();
    await eventually(
      async () => ((await api(h, 'get', `/runs/${someRun}`, fixture.organizationToken)).status === 200 ? true : undefined),
      15_000,
      100,
    );
    const recoveryMs = Date.now() - recoveredAt;
    const poolAfterRecovery = { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
    const after: string[] = [];
    await createRuns(h, fixture, 40, 4, after);

    const total = before.length + after.length;
    const final = await waitUntilAllFinal(h.orm, total, 60_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const redis = redisClient(h.config.redisUrl);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);

    // A run that did not complete was hit by the outage: a task server's plan read or callback was refused.
    const stopped = await h.orm.em.fork().execute<{ run_id: string; status: string; result_ids: string[] }[]>(
      `select r.id as run_id, r.status, array_agg(tr.id) as result_ids from runs r
           join task_stages ts on ts.run_id = r.id join task_results tr on tr.task_stage_id = ts.id
          where r.status <> 'applied' group by r.id, r.status`,
    );
    const refused = new Set(
      servers.flatMap((server) =>
        server.requests
          .filter((record) => [record.plan, ...record.callbacks].some((call) => call !== undefined && call.status !== 200))
          .map((record) => record.payload?.task_result_id ?? ''),
      ),
    );
    const unexplained = stopped.filter((row) => !row.result_ids.some((id) => refused.has(id)));

    report.scenarios['postgresRestart'] = {
      runs: total,
      postgresStops: 1,
      downtimeMs,
      recoveryMs,
      poolAfterRecovery,
      poolAtQuiescence: { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount },
      probesDuringOutage: outage.length,
      maxProbeMs: Math.round(Math.max(...outage.map((probe) => probe.ms))),
      responses503: statuses.get(503) ?? 0,
      finalStatuses: final,
      runsStoppedByTheOutage: stopped.length,
      ledger: { ...ledger, violations: ledger.violations.slice(0, 20) },
      invariantViolations: check.violations.slice(0, 20),
      httpServerErrorsBut503: serverErrorsBut503(statuses),
      requestsAnsweredWithOther5xx: statuses.failures.slice(0, 20),
      unexpectedExits: fleet.unexpectedExits.length,
      invariantCounts: check.counts,
      violations: check.violations.length + ledger.violations.length + unexplained.length,
      durationMs: Date.now() - testStarted,
    };
    await writeReport();

    expect(Math.max(...outage.map((probe) => probe.ms))).toBeLessThan(6_000);
    // No connection leaked by the outage: nothing is in flight now, so every pooled connection is idle.
    expect(pool.totalCount).toBe(pool.idleCount);
    expect(pool.waitingCount).toBe(0);
    expect(unexplained).toEqual([]);
    for (const row of stopped) expect(row.status).toBe('errored');
    // Runs created after the outage all complete.
    const afterStatuses = await h.orm.em
      .fork()
      .execute<{ status: string }[]>(`select distinct status from runs where id in (${after.map(() => '?').join(', ')})`, after);
    expect(afterStatuses.map((row) => row.status)).toEqual(['applied']);
    expect(ledger.violations).toEqual([]);
    expect(check.violations).toEqual([]);
    expect(check.counts).toMatchObject({ runs: total, final: total, results: total * TASKS_PER_RUN });
    expect(serverErrorsBut503(statuses)).toEqual({});
    expect(fleet.unexpectedExits).toEqual([]);
  }, 150_000);
});
