import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { probeKey, REDIS_BACK_MESSAGE, REDIS_LOST_MESSAGE } from '@runtasks/shared/queue';
import {
  checkLedgers,
  createRuns,
  invariants,
  notApplied,
  onCleanup,
  RETRY_DELAYS_SECONDS,
  runCleanups,
  setUpWorkload,
  statusCounts,
  TASKS_PER_RUN,
  waitUntilAllFinal,
} from '../support/cluster.ts';
import { recordFigures } from '../support/figures.ts';
import { eventually } from '../support/fixtures.ts';
import { countMessages, messageMarks, startOutsideStack } from '../support/outside-stack.ts';
import { RedisClusterSet, SentinelSet } from '../support/redis-topologies.ts';

/**
 * Redis failing over under load. The service (an API process and two workers, as an operator starts
 * them) runs FAILOVER_RUNS runs × 3 tasks against a Redis of its own on loopback: a primary with a
 * replica and three sentinels, or a cluster of three primaries with a replica each. A third of the way
 * in, the primary the queue lives on is killed -9 and its replica is promoted (by the sentinels, or by
 * the cluster itself), while runs are still being created. Replication is asynchronous, so the last
 * jobs the old primary took may be gone: the outbox publishes again what Redis did not accept, and the
 * sweeper re-drives a run whose job was lost. At the end nothing may be lost, duplicated or stuck, no
 * job may be in BullMQ's failed set, and each process logged the failover as two warnings, one when
 * Redis went and one when it was back.
 */

const SUITE = 'redis-failover';
const RUNS = Number(process.env['FAILOVER_RUNS'] ?? 300);
const CREATE_CONCURRENCY = 6;
const PASSWORD = 'failover-data-password';

type Mode = 'sentinel' | 'cluster';

describe('Redis failover under load', () => {
  afterEach(runCleanups, 120_000);
  afterAll(runCleanups, 120_000);

  it.each<Mode>(['sentinel', 'cluster'])(
    `%s: the primary killed mid-load and its replica promoted: ${RUNS} runs, none lost, duplicated, stuck or failed`,
    async (mode) => {
      const testStarted = Date.now();
      const topology =
        mode === 'sentinel' ? await SentinelSet.start({ password: PASSWORD }) : await RedisClusterSet.start({ password: PASSWORD });
      onCleanup(() => topology.stop(), `redis ${mode}`);
      const queuePrefix = mode === 'cluster' ? '{runtasks}' : 'runtasks';
      const stack = await startOutsideStack({
        redisEnv: topology.env(),
        queuePrefix,
        extraEnv: {
          TASK_RETRY_DELAYS_SECONDS: RETRY_DELAYS_SECONDS,
          SWEEPER_INTERVAL_SECONDS: '0.5',
          // Longer than the dispatch lease (30 s): a claim lost with a killed worker is re-driven before its deadline.
          TASK_PROGRESS_TIMEOUT_SECONDS: '45',
          OUTBOX_POLL_INTERVAL_MS: '200',
          // On, as by default, high enough for one token creating every run.
          RATE_LIMIT_PER_SECOND: '1000',
        },
      });
      const { fixture, servers, hmacKeys } = await setUpWorkload(stack.outside, `failover-${mode}`, 'callback');

      const runIds: string[] = [];
      const creating = createRuns(stack.outside, fixture, RUNS, CREATE_CONCURRENCY, runIds);
      await eventually(async () => (((await statusCounts(stack.db.orm))['applied'] ?? 0) >= RUNS / 3 ? true : undefined), 240_000, 100);
      const marks = messageMarks(stack);
      const createdBefore = runIds.length;
      const failover = topology instanceof SentinelSet ? await topology.failover() : await topology.failover(probeKey(queuePrefix));
      const createdDuringFailover = runIds.length - createdBefore;
      const [{ now: promotedAt } = { now: '' }] = await stack.db.orm.em.fork().execute<{ now: string }[]>(`select now()::text as now`);
      await creating;

      const final = await waitUntilAllFinal(stack.db.orm, RUNS, 240_000, stack.fleet).catch(async (error: unknown) => {
        // Where the work stands: jobs Redis holds, and events the outbox has not published.
        const [unpublished] = await stack.db.orm.em
          .fork()
          .execute<{ n: string }[]>(`select count(*) as n from outbox_events where published_at is null`);
        const jobs = await stack.queue.getJobCounts().catch((cause: unknown) => String(cause));
        // The workers' connections as Redis sees them: a fetch loop blocked or gone shows here.
        const workers = await stack.queue.getWorkers().catch((cause: unknown) => String(cause));
        throw new Error(
          `${(error as Error).message}\njobs: ${JSON.stringify(jobs)}; unpublished events: ${unpublished?.n}; workers: ${JSON.stringify(workers)}`,
          { cause: error },
        );
      });
      const ledger = await checkLedgers(stack.db.orm, stack.db.secrets, servers);
      const redis =
        topology instanceof SentinelSet ? await topology.primaryClient() : await topology.primaryClientOf(probeKey(queuePrefix));
      onCleanup(() => redis.disconnect(), 'redis client');
      const check = await invariants(stack.db.orm, redis, queuePrefix, [...hmacKeys, fixture.organizationToken, stack.outside.adminToken]);
      const failedJobs = await stack.queue.getFailedCount();
      // Each process has told the failover by now: the availability probe runs every half second.
      const lost = await eventually(
        async () => {
          const counts = countMessages(stack, REDIS_BACK_MESSAGE, marks);
          return Object.values(counts).every((count) => count >= 1) ? countMessages(stack, REDIS_LOST_MESSAGE, marks) : undefined;
        },
        15_000,
        100,
      ).catch(() => countMessages(stack, REDIS_LOST_MESSAGE, marks));
      const back = countMessages(stack, REDIS_BACK_MESSAGE, marks);
      // Events committed before the replica was promoted and published after: those Redis could not take
      // while it had no primary, which the outbox kept and published once it had one.
      const [outbox] = await stack.db.orm.em
        .fork()
        .execute<{ events: string | number; redriven: string | number }[]>(
          `select count(*) as events, count(*) filter (where created_at < ?::timestamptz and published_at > ?::timestamptz) as redriven from outbox_events`,
          [promotedAt, promotedAt],
        );
      const duplicated = ledger.violations.length + check.violations.filter((line) => /INV-[12]\b/.test(line)).length;

      recordFigures(SUITE, mode, {
        runs: RUNS,
        tasksPerRun: TASKS_PER_RUN,
        failoverMs: failover.ms,
        killedPrimaryPort: failover.killed,
        promotedPort: failover.promoted,
        runsCreatedDuringFailover: createdDuringFailover,
        outboxEvents: Number(outbox?.events),
        outboxEventsPublishedAfterPromotion: Number(outbox?.redriven),
        lost: RUNS - Object.values(final).reduce((sum, count) => sum + count, 0),
        stuck: check.violations.filter((line) => /INV-[34]\b/.test(line)).length,
        duplicated,
        failedJobs,
        finalStatuses: final,
        redeliveredResults: ledger.redelivered,
        warningsRedisLost: lost,
        warningsRedisBack: back,
        invariantViolations: check.violations.length,
        unexpectedExits: stack.fleet.unexpectedExits.length + stack.api.unexpectedExits.length,
        durationMs: Date.now() - testStarted,
      });

      expect(runIds).toHaveLength(RUNS);
      expect(await notApplied(stack.db.orm)).toEqual([]);
      expect(final).toEqual({ applied: RUNS });
      expect(ledger.violations).toEqual([]);
      expect(check.violations).toEqual([]);
      expect(check.counts).toMatchObject({ runs: RUNS, final: RUNS, results: RUNS * TASKS_PER_RUN });
      expect(failedJobs).toBe(0);
      expect(stack.fleet.unexpectedExits).toEqual([]);
      expect(stack.api.unexpectedExits).toEqual([]);
      // The failover as each process logged it: one warning when Redis went, one when it was back.
      const everyProcess = (count: number) => Object.fromEntries(Object.keys(lost).map((name) => [name, count]));
      const warnings = { lost, back };
      const oneEach = { lost: everyProcess(1), back: everyProcess(1) };
      // Otherwise with the workers' last lines, which say why a process counted another outage.
      expect(JSON.stringify(warnings) === JSON.stringify(oneEach) ? warnings : { ...warnings, logs: stack.fleet.tails() }).toEqual(oneEach);
    },
    600_000,
  );
});
