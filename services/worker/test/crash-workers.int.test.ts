import { describe, expect, it } from '@jest/globals';
import { QUEUES } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import pg from 'pg';
import {
  checkLedgers,
  createRuns,
  harness,
  inFlightPosts,
  invariants,
  notApplied,
  onCleanup,
  redisClient,
  serverErrorsBut503,
  setUpWorkload,
  TASKS_PER_RUN,
  waitUntilAllFinal,
  watchStatuses,
  workerEnv,
  WorkerFleet,
} from '../../../test/support/cluster.ts';
import { eventually } from '../../../test/support/fixtures.ts';
import { useCrashReport } from './crash/report.ts';

/**
 * Crash test: worker processes killed with SIGKILL under load. It ends, once the system is quiet,
 * with the "nothing lost" invariants (test/support/invariants.ts), the task servers' ledgers, and no HTTP
 * 5xx other than 503. Everything runs on loopback.
 */
describe('crash tests: nothing is lost when processes and backing services die', () => {
  const { report, writeReport } = useCrashReport('workers');

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
});
