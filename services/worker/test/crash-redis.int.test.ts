import { describe, expect, it } from '@jest/globals';
import { JOBS, QUEUES, REDIS_BACK_MESSAGE, REDIS_LOST_MESSAGE, runCreatedJobId } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import {
  checkLedgers,
  createRuns,
  harness,
  invariants,
  notApplied,
  privateRedis,
  redisClient,
  serverErrorsBut503,
  setUpWorkload,
  statusCounts,
  TASKS_PER_RUN,
  waitUntilAllFinal,
  watchStatuses,
  workerEnv,
  WorkerFleet,
} from '../../../test/support/cluster.ts';
import { eventually } from '../../../test/support/fixtures.ts';
import { freePort } from '../../../test/support/processes.ts';
import { useCrashReport } from './crash/report.ts';

/**
 * Crash test: Redis killed mid-load and restarted empty. It ends, once the system is quiet,
 * with the "nothing lost" invariants (test/support/invariants.ts), the task servers' ledgers, and no HTTP
 * 5xx other than 503. Everything runs on loopback, on a private Redis of its own port.
 */
describe('crash tests: nothing is lost when processes and backing services die', () => {
  const { report, writeReport } = useCrashReport('redis');

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
      async () => (logged.every(({ worker, from }) => worker.messages.slice(from).includes(REDIS_LOST_MESSAGE)) ? true : undefined),
      15_000,
      50,
    );

    // Run creation never waits on Redis (this API, built without its operations, does not publish at
    // once either): runs are still created while it is down (it comes back only once all 40 are), and
    // their events wait in the outbox. How long each took is reported, not asserted: a timed bound
    // failed on a loaded machine (5.5 s against 5) with nothing waiting on Redis.
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
    // The outage, as each worker logged it: one warning when Redis went, one when it was back.
    const told = (message: string) => logged.map(({ worker, from }) => worker.messages.slice(from).filter((msg) => msg === message).length);
    expect(told(REDIS_LOST_MESSAGE)).toEqual(logged.map(() => 1));
    expect(told(REDIS_BACK_MESSAGE)).toEqual(logged.map(() => 1));
  }, 120_000);
});
