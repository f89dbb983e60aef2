import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { ORDINARY_ATTEMPTS, QUEUES } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import pg from 'pg';
import {
  apiAgainst,
  createRuns,
  invariants,
  onCleanup,
  privatePostgres,
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
} from '../support/cluster.ts';
import { recordFigures } from '../support/figures.ts';
import { eventually } from '../support/fixtures.ts';

/**
 * A PostgreSQL outage longer than the ordinary retry budget of a job (five attempts from half a second,
 * about 7.5 s): jobs that come due while it is down (each stage's deadline, the sweeps) retry for as long
 * as it lasts instead of landing in BullMQ's failed set, which keeps meaning "a job that will not
 * succeed". A private cluster is stopped with `-m immediate` while a worker process waits on deadlines.
 */

const SUITE = 'long-outage';
const RUNS = 8;
/** Short, so the stages' deadline jobs come due during the outage. */
const PROGRESS_TIMEOUT_SECONDS = '3';
/** Longer than the ordinary budget plus the progress timeout, so the old retries would all have been spent. */
const MIN_OUTAGE_MS = 14_000;

describe('a PostgreSQL outage longer than the ordinary retry budget', () => {
  afterEach(runCleanups, 60_000);
  afterAll(runCleanups, 60_000);

  it('leaves nothing in the failed set; every run ends and the invariants hold', async () => {
    const cluster = await privatePostgres();
    await cluster.start();
    const admin = new pg.Client({ connectionString: cluster.url('postgres') });
    await admin.connect();
    await admin.query('create database runtasks_outage');
    await admin.end();
    const env = { TASK_PROGRESS_TIMEOUT_SECONDS: PROGRESS_TIMEOUT_SECONDS };
    const h = await apiAgainst(cluster.url('runtasks_outage'), env);
    const statuses = watchStatuses(h.server);
    // Task servers that acknowledge and never call back: each stage ends at its deadline, by a job.
    const { fixture, hmacKeys } = await setUpWorkload(h, 'outage', 'no-callback');
    const fleet = new WorkerFleet(workerEnv(h, env));
    await fleet.start().started;
    const redis = redisClient(h.config.redisUrl);
    const queue = new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix });
    onCleanup(() => queue.close(), 'queue');

    const runIds: string[] = [];
    await createRuns(h, fixture, RUNS, 4, runIds);
    // Every result delivered and waiting for its callback: its deadline job is in Redis.
    await eventually(
      async () => {
        const [row] = await h.orm.em
          .fork()
          .execute<{ n: string | number }[]>(`select count(*) as n from task_results where acknowledged_at is not null`);
        return Number(row?.n) === RUNS * TASKS_PER_RUN ? true : undefined;
      },
      30_000,
      50,
    );

    await cluster.stopImmediate();
    const downAt = Date.now();
    // Jobs fail while it is down, and some have failed more often than the ordinary budget allows, yet
    // wait for another attempt rather than sitting in the failed set.
    const pastOrdinaryBudget = await eventually(
      async () => {
        const delayed = await queue.getJobs(['delayed']);
        const retried = delayed.filter((job) => job.attemptsMade >= ORDINARY_ATTEMPTS);
        return retried.length > 0 && Date.now() - downAt >= MIN_OUTAGE_MS ? retried : undefined;
      },
      45_000,
      250,
    );
    const failedDuringOutage = await queue.getFailedCount();
    await cluster.start();
    const downtimeMs = Date.now() - downAt;

    const final = await waitUntilAllFinal(h.orm, RUNS, 45_000, fleet);
    // Quiet: nothing left retrying, so the failed set's count is the last word.
    await eventually(
      async () => ((await queue.getJobs(['delayed'])).every((job) => job.attemptsMade === 0) ? true : undefined),
      30_000,
      250,
    );
    const counts = await queue.getJobCounts('failed', 'completed');
    const completed = await queue.getJobs(['completed']);
    const mostAttempts = Math.max(...completed.map((job) => job.attemptsMade));
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);
    recordFigures(SUITE, 'postgres stopped longer than the ordinary retry budget', {
      runs: RUNS,
      tasksPerRun: TASKS_PER_RUN,
      downtimeMs,
      jobsPastOrdinaryBudget: pastOrdinaryBudget.length,
      mostAttemptsOfACompletedJob: mostAttempts,
      failedJobs: counts['failed'] ?? 0,
      finalStatuses: final,
      invariantViolations: check.violations.length,
    });

    expect(downtimeMs).toBeGreaterThanOrEqual(MIN_OUTAGE_MS);
    expect(failedDuringOutage).toBe(0);
    expect(counts['failed']).toBe(0);
    // A job that failed past the old budget went on to complete once PostgreSQL was back.
    expect(mostAttempts).toBeGreaterThanOrEqual(ORDINARY_ATTEMPTS);
    // Mandatory tasks that never called back: each run ends errored at its deadline.
    expect(await statusCounts(h.orm)).toEqual({ errored: RUNS });
    expect(check.violations).toEqual([]);
    expect(serverErrorsBut503(statuses)).toEqual({});
    expect(fleet.unexpectedExits).toEqual([]);
    // The retries were no error of the jobs': nothing was logged as a job that failed.
    expect(fleet.all.flatMap((worker) => worker.messages).filter((msg) => msg === 'job failed')).toEqual([]);
  }, 150_000);
});
