import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { FINAL_RUN_STATUSES, randomAlphanumeric, type RunStatus } from '@runtasks/shared/domain';
import { QUEUES, runCreatedJobId } from '@runtasks/shared/queue';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import {
  ApiProcess,
  ATTEMPT_CAP,
  checkLedgers,
  createRuns,
  inFlightPosts,
  harness,
  invariants,
  notApplied,
  onCleanup,
  randomAdminToken,
  redisClient,
  runCleanups,
  setUpWorkload,
  TASKS_PER_RUN,
  waitUntilAllFinal,
  WorkerFleet,
  workerEnv,
  within,
  type WorkerProcess,
} from '../support/cluster.ts';
import { recordFigures } from '../support/figures.ts';
import { createRun, eventually } from '../support/fixtures.ts';
import { probe } from '../support/processes.ts';
import { OutboxRelay } from '../../services/worker/src/outbox-relay.ts';

/**
 * Process faults with worker and API processes started from the sources.
 *
 * - Acceptance (workers killed and frozen, plus kill -9 of the API): at least 1,000 runs × 3 tasks created
 *   concurrently through an API process while, at seeded random points of the load, workers are killed -9
 *   (and replaced), one worker is SIGSTOPped for longer than BullMQ's lock duration (its jobs stall and
 *   run again elsewhere; on SIGCONT it wakes with stale locks and leases, as after a blocked event loop),
 *   and the API process is killed -9 mid-request and restarted. Nothing may be lost, duplicated or stuck.
 * - A run-created job stalled twice (past maxStalledCount) fails in BullMQ; the sweeper still
 *   drives the run.
 * - SIGTERM while delivering: exit 0, no stalls, no second POST.
 *
 * The same run-created job twice (a replayed outbox row) is covered by
 * services/worker/test/outbox-relay.int.test.ts ("publishing twice is harmless"), and a job processed twice by
 * two workers happens here whenever a stalled job runs again; not repeated as a test of its own.
 * FAULT_SEED replays a fault schedule; FAULT_RUNS changes the load (default 1,000).
 */

const SUITE = 'processes';
const RUNS = Number(process.env['FAULT_RUNS'] ?? 1000);
const SEED = Number(process.env['FAULT_SEED'] ?? 20261123);
const CREATE_CONCURRENCY = 8;
/** BullMQ's default lockDuration is 30 s; a stop longer than that lets the stall check take the worker's jobs. */
const SIGSTOP_MS = 33_000;

/** mulberry32: a small seeded PRNG, so a failing fault schedule can be replayed with FAULT_SEED. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type CreateOutcome = 'created' | 'noAnswer' | 'refused';

interface LoadResult {
  /** Ids of runs the API answered 201 for. */
  created: string[];
  /** Requests that got no answer (the connection broke after it may have been sent): the run may or may not exist. */
  noAnswer: number;
  /** Requests refused at connect (the API was down): certainly not created. */
  refused: number;
  statusClasses: Record<string, number>;
  unexpected: string[];
}

/**
 * Creates runs through the API process until `total` were answered 201, `concurrency` at a time.
 * A create that fails with a connection error waits until the API answers /ping again, then is retried.
 */
async function createRunsThroughProcess(
  apiProcess: ApiProcess,
  token: string,
  workspaceIds: readonly string[],
  total: number,
  concurrency: number,
  onProgress: (answered: number) => void,
): Promise<LoadResult> {
  const result: LoadResult = { created: [], noAnswer: 0, refused: 0, statusClasses: {}, unexpected: [] };
  let claimed = 0;
  // Over the workload's workspaces in turn: one run at a time holds a workspace (the run queue).
  const bodyOf = (index: number): string =>
    JSON.stringify({
      data: {
        type: 'runs',
        attributes: { message: 'acceptance load', 'auto-apply': true },
        relationships: { workspace: { data: { type: 'workspaces', id: workspaceIds[index % workspaceIds.length] } } },
      },
    });
  const createOne = async (body: string): Promise<CreateOutcome> => {
    try {
      const res = await fetch(`${apiProcess.baseUrl}/api/v2/runs`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/vnd.api+json' },
        body,
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      const statusClass = `${Math.floor(res.status / 100)}xx`;
      result.statusClasses[statusClass] = (result.statusClasses[statusClass] ?? 0) + 1;
      if (res.status !== 201) {
        result.unexpected.push(`${res.status} ${text.slice(0, 200)}`);
        throw new Error(`create run answered ${res.status}: ${text.slice(0, 500)}`);
      }
      result.created.push((JSON.parse(text) as { data: { id: string } }).data.id);
      onProgress(result.created.length);
      return 'created';
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause;
      // fetch's TypeError comes from Node's realm, not Jest's: compare by name.
      if ((error as Error).name !== 'TypeError' || cause === undefined) throw error;
      // fetch failed: ECONNREFUSED means nothing was sent; anything else (reset, socket closed) may have been.
      return cause.code === 'ECONNREFUSED' ? 'refused' : 'noAnswer';
    }
  };
  const lane = async (): Promise<void> => {
    while (claimed < total) {
      claimed += 1;
      const body = bodyOf(claimed);
      for (;;) {
        const outcome = await createOne(body);
        if (outcome === 'created') break;
        result[outcome] += 1;
        await eventually(async () => ((await probe(`${apiProcess.baseUrl}/api/v2/ping`)).status === 204 ? true : undefined), 60_000, 50);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return result;
}

describe('process faults: kill -9 and SIGSTOP of workers and kill -9 of the API under 1,000 runs × 3 tasks', () => {
  afterEach(runCleanups, 120_000);
  afterAll(runCleanups, 120_000);

  it(`acceptance: ${RUNS} runs × ${TASKS_PER_RUN} tasks with seeded worker kills, a worker SIGSTOP past the lock duration and API kills: nothing lost, duplicated or stuck`, async () => {
    const testStarted = Date.now();
    const random = seededRandom(SEED);
    // The load is closed-loop (as fast as the API takes it), so on two cores the pipeline runs at capacity and
    // callbacks queue for the API replica's connections: seconds, more while a frozen worker holds locks. The
    // task servers wait up to 60 s per attempt (HashiCorp's scaffold waits without limit) and results get 120 s.
    const h = await harness({ TASK_PROGRESS_TIMEOUT_SECONDS: '120' });
    // Acknowledgements take 200 ms, so a killed or frozen worker has POSTs in flight. The task server still calls
    // back, so such a result usually ends without a re-dispatch; any re-dispatch must carry the same result id.
    const { fixture, servers, hmacKeys, workspaceIds } = await setUpWorkload(h, 'acceptance', 'slow:200', TASKS_PER_RUN, {
      timeoutMs: 60_000,
    });
    // Two API replicas in their own processes: creates go to one that is killed (a create in flight is what a
    // dying API can lose); callbacks and plan reads go to the other, as a load balancer would send them.
    const apiAdminToken = randomAdminToken();
    const replica = async (): Promise<ApiProcess> => {
      const started = await ApiProcess.create({
        databaseUrl: h.config.databaseUrl,
        redisUrl: h.config.redisUrl,
        queuePrefix: h.config.queuePrefix,
        adminToken: apiAdminToken,
      });
      await started.start();
      return started;
    };
    const apiProcess = await replica();
    const callbackApi = await replica();
    const fleet = new WorkerFleet(workerEnv(h, { PUBLIC_BASE_URL: callbackApi.baseUrl }));
    await Promise.all([fleet.start().started, fleet.start().started, fleet.start().started]);

    // Every stall BullMQ detects (a killed or stopped worker's active job taken back); a blocking reader,
    // so maxRetriesPerRequest null as BullMQ wants.
    const eventsConnection = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    const queueEvents = new QueueEvents(QUEUES.runs, { connection: eventsConnection, prefix: h.config.queuePrefix });
    onCleanup(() => eventsConnection.quit().catch(() => eventsConnection.disconnect()), 'queue events connection');
    onCleanup(() => queueEvents.close(), 'queue events');
    await queueEvents.waitUntilReady();
    const stalledJobs: string[] = [];
    queueEvents.on('stalled', ({ jobId }) => stalledJobs.push(jobId));

    // The fault plan: points of the load (runs answered 201) drawn from the seed.
    const at = (from: number, to: number): number => Math.floor(RUNS * (from + (to - from) * random()));
    const plan = [
      ...Array.from({ length: 5 }, () => ({ kind: 'workerKill' as const, at: at(0.05, 0.9) })),
      { kind: 'workerStop' as const, at: at(0.1, 0.3) },
      ...Array.from({ length: 2 }, () => ({ kind: 'apiKill' as const, at: at(0.2, 0.85) })),
    ].sort((a, b) => a.at - b.at);
    const injected = { workerKill: 0, workerStop: 0, apiKill: 0 };
    const stopped = new Set<WorkerProcess>();
    const stopDetails: { victim: string; heldMs: number }[] = [];
    const apiKills: { atRun: number; downMs: number }[] = [];
    const activeAtFaults: string[] = [];
    const queueClient = redisClient(h.config.redisUrl);
    const activeJobs = (): Promise<number> => queueClient.llen(`${h.config.queuePrefix}:${QUEUES.runs}:active`);
    let answered = 0;
    const waiters: { at: number; wake: () => void }[] = [];
    const reached = (point: number): Promise<void> =>
      point <= answered ? Promise.resolve() : new Promise((resolve) => waiters.push({ at: point, wake: resolve }));
    const onProgress = (count: number): void => {
      answered = count;
      for (const waiter of waiters.filter((w) => w.at <= count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.wake();
      }
    };
    const pickVictim = (): WorkerProcess => {
      const candidates = fleet.live().filter((worker) => !stopped.has(worker));
      const victim = candidates[Math.floor(random() * candidates.length)];
      if (!victim) throw new Error('no live worker to fault');
      return victim;
    };
    // A test that fails early must not leave faults waiting for progress that never comes.
    let abandoned = false;
    const holdTimers: NodeJS.Timeout[] = [];
    onCleanup(() => {
      abandoned = true;
      for (const waiter of waiters.splice(0)) waiter.wake();
      for (const timer of holdTimers) clearTimeout(timer);
    }, 'fault plan');
    /** Injects one fault; a SIGSTOP returns its hold (wrapped: an async function would wait for a returned promise), which ends by itself. */
    const injectNow = async (fault: (typeof plan)[number]): Promise<{ hold?: Promise<void> }> => {
      if (abandoned) return {};
      injected[fault.kind] += 1;
      // Evidence the fault landed on work in progress: jobs active and POSTs unanswered at that moment.
      activeAtFaults.push(
        `${fault.kind} at ${Math.round((Date.now() - testStarted) / 1000)} s, run ${answered}: ${await activeJobs()} active jobs, ${inFlightPosts(servers)} POSTs in flight`,
      );
      if (fault.kind === 'workerKill') {
        await fleet.kill9(pickVictim());
        await fleet.start().started;
      } else if (fault.kind === 'workerStop') {
        const victim = pickVictim();
        stopped.add(victim);
        // A stopped process ignores SIGTERM: resume it first if the test ends early.
        onCleanup(() => victim.child.kill('SIGCONT'), 'sigcont');
        const stoppedAt = Date.now();
        victim.child.kill('SIGSTOP');
        // The fault's timing: hold the worker frozen past the lock duration, then let it wake. Other faults go on meanwhile.
        const hold = new Promise<void>((resolve) =>
          holdTimers.push(
            setTimeout(() => {
              victim.child.kill('SIGCONT');
              stopped.delete(victim);
              stopDetails.push({ victim: victim.name, heldMs: Date.now() - stoppedAt });
              resolve();
            }, SIGSTOP_MS),
          ),
        );
        return { hold };
      } else {
        const killedAt = Date.now();
        const atRun = answered;
        await apiProcess.kill9();
        await apiProcess.start();
        apiKills.push({ atRun, downMs: Date.now() - killedAt });
      }
      return {};
    };
    const holds: Promise<void>[] = [];
    /** Worker faults go one after another (a kill never picks a replacement still starting); API kills on their own. */
    const runPlan = async (faults: typeof plan): Promise<void> => {
      for (const fault of faults) {
        await reached(fault.at);
        const { hold } = await injectNow(fault);
        if (hold) holds.push(hold);
      }
    };
    const injecting = Promise.all([
      runPlan(plan.filter((fault) => fault.kind !== 'apiKill')),
      runPlan(plan.filter((fault) => fault.kind === 'apiKill')),
    ]).then(() => Promise.all(holds));
    injecting.catch(() => undefined);

    const load = await createRunsThroughProcess(apiProcess, fixture.organizationToken, workspaceIds, RUNS, CREATE_CONCURRENCY, onProgress);
    await injecting;
    const loadAndFaultsMs = Date.now() - testStarted;

    const [{ n: dbRuns } = { n: 0 }] = await h.orm.em.fork().execute<{ n: string | number }[]>(`select count(*) as n from runs`);
    const runsInDatabase = Number(dbRuns);
    // Longer than the progress timeout: a result whose callback was lost is ended by its deadline, not left open.
    const final = await waitUntilAllFinal(h.orm, runsInDatabase, 200_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const check = await invariants(h.orm, queueClient, h.config.queuePrefix, [
      ...hmacKeys,
      fixture.organizationToken,
      h.adminToken,
      apiAdminToken,
    ]);

    // Every 201'd run exists and is final (lost = answered 201 but missing or not final).
    const runRows = await h.orm.em.fork().execute<{ id: string; status: string }[]>(`select id, status from runs`);
    const finalIds = new Set(runRows.filter((row) => FINAL_RUN_STATUSES.has(row.status as RunStatus)).map((row) => row.id));
    const lost = load.created.filter((id) => !finalIds.has(id));
    const stuck = runsInDatabase - Object.values(final).reduce((sum, n) => sum + n, 0);
    const [duplicates = { stages: 0, results: 0 }] = await h.orm.em.fork().execute<{ stages: string | number; results: string | number }[]>(
      `select (select count(*) from (select 1 from task_stages group by run_id, stage having count(*) > 1) s) as stages,
              (select count(*) from (select 1 from task_results group by task_stage_id, task_id having count(*) > 1) r) as results`,
    );
    // Each POST names its own result and that result's run: a re-dispatch never borrows another result's identity.
    const owners = new Map(
      (
        await h.orm.em
          .fork()
          .execute<{ id: string; run_id: string }[]>(
            `select tr.id, ts.run_id from task_results tr join task_stages ts on ts.id = tr.task_stage_id`,
          )
      ).map((row) => [row.id, row.run_id]),
    );
    const misattributed = servers.flatMap((server) =>
      server.requests
        .filter((record) => record.method === 'POST' && !record.verification && record.payload)
        .filter((record) => owners.get(record.payload?.task_result_id ?? '') !== record.payload?.run_id)
        .map((record) => `${record.payload?.task_result_id} carried run ${record.payload?.run_id}`),
    );
    const callbackAnswers = Object.fromEntries(
      [
        ...servers
          .flatMap((server) =>
            server.requests.flatMap((record) => record.callbacks.map((call) => String(call.status ?? call.error ?? 'none'))),
          )
          .reduce((counts, status) => counts.set(status, (counts.get(status) ?? 0) + 1), new Map<string, number>()),
      ].map(([status, n]) => [`status ${status}`, n]),
    );
    // Results the faults disturbed on the task server's side: a callback that needed a retry or was not answered
    // 200 (409: the result had ended before it arrived), or a plan read that needed a retry or failed (the example
    // server then reports `failed`, which errors the run: correct, if unlucky).
    const undelivered = new Set(
      servers.flatMap((server) =>
        server.requests
          .filter(
            (record) =>
              record.callbacks.some((call) => call.status !== 200 || (call.retried?.length ?? 0) > 0) ||
              (record.plan !== undefined && (record.plan.status !== 200 || (record.plan.retried?.length ?? 0) > 0)),
          )
          .map((record) => record.payload?.task_result_id ?? ''),
      ),
    );
    const planReadsFailed = servers.reduce(
      (sum, server) => sum + server.requests.filter((record) => record.plan !== undefined && record.plan.status !== 200).length,
      0,
    );
    const notAppliedRuns = (await notApplied(h.orm)) as { id: string; status: string; results: { id: string }[] }[];
    const unexplained = notAppliedRuns.filter(
      (row) => row.status !== 'errored' || !row.results.some((result) => undelivered.has(result.id)),
    );
    const violations = check.violations.length + ledger.violations.length + lost.length + misattributed.length + unexplained.length;

    recordFigures(SUITE, 'acceptance', {
      seed: SEED,
      runsRequested: RUNS,
      runsAnswered201: load.created.length,
      runsInDatabase,
      tasksPerRun: TASKS_PER_RUN,
      results: check.counts.results,
      createsWithoutAnswer: load.noAnswer,
      createsRefused: load.refused,
      createResponsesByClass: load.statusClasses,
      faultsInjected: { ...injected },
      faultsTotal: injected.workerKill + injected.workerStop + injected.apiKill,
      sigstopHeldMs: stopDetails[0]?.heldMs ?? 0,
      workAtFaults: activeAtFaults.join('; '),
      apiKillsAtRun: apiKills.map((kill) => `${kill.atRun} (down ${kill.downMs} ms)`).join(', '),
      stalledJobsDetected: stalledJobs.length,
      taskServerPosts: ledger.posts,
      resultsPosted: ledger.resultsPosted,
      redispatches: ledger.posts - ledger.resultsPosted,
      resultsRedelivered: ledger.redelivered,
      maxPostsPerResult: ledger.maxPostsPerResult,
      attemptCap: ATTEMPT_CAP,
      finalStatuses: final,
      runsErroredByUndeliveredCallbacks: notAppliedRuns.length,
      planReadsFailed,
      callbacksRetried: servers.reduce(
        (sum, server) => sum + server.requests.reduce((n, record) => n + record.callbacks.filter((call) => call.retried).length, 0),
        0,
      ),
      lost: lost.length,
      stuck,
      duplicateStages: Number(duplicates.stages),
      duplicateResults: Number(duplicates.results),
      callbackAnswers,
      unexpectedExits: fleet.unexpectedExits.length + apiProcess.unexpectedExits.length + callbackApi.unexpectedExits.length,
      invariantViolations: violations,
      loadAndFaultsMs,
      durationMs: Date.now() - testStarted,
    });

    expect(injected).toEqual({ workerKill: 5, workerStop: 1, apiKill: 2 });
    expect(stopDetails[0]?.heldMs).toBeGreaterThan(30_000);
    expect(load.created).toHaveLength(RUNS);
    expect(load.unexpected).toEqual([]);
    // A create that got no answer may or may not exist; nothing else may.
    expect(runsInDatabase).toBeGreaterThanOrEqual(RUNS);
    expect(runsInDatabase).toBeLessThanOrEqual(RUNS + load.noAnswer);
    expect(lost).toEqual([]);
    expect(stuck).toBe(0);
    // A run that did not apply was errored by a result the fault disturbed on the task server's side: its callback
    // or its plan read timed out while the frozen worker's transactions held their stage locks and the callbacks
    // queued behind them held the API replica's pool (until PostgreSQL's idle_in_transaction_session_timeout
    // ended the frozen sessions); the example server does not retry.
    expect(unexplained).toEqual([]);
    expect(Object.keys(final).filter((status) => status !== 'applied' && status !== 'errored')).toEqual([]);
    expect([Number(duplicates.stages), Number(duplicates.results)]).toEqual([0, 0]);
    expect(misattributed).toEqual([]);
    expect(ledger.violations).toEqual([]);
    expect(ledger.resultsPosted).toBe(runsInDatabase * TASKS_PER_RUN);
    expect(check.violations).toEqual([]);
    expect(check.counts).toMatchObject({ runs: runsInDatabase, final: runsInDatabase, results: runsInDatabase * TASKS_PER_RUN });
    // The callback replica never answered 5xx (a re-dispatched result's second callback finds it final: 409).
    expect(
      Object.keys(callbackAnswers).filter((answer) => /^status \d+$/.test(answer) && !['status 200', 'status 409'].includes(answer)),
    ).toEqual([]);
    // Every result of an applied run was called back: answered 200, or processed after the task server gave up
    // waiting (its client timed out while the API waited on a frozen worker's locks; the result is still final,
    // and the retry, if any, was answered 409).
    const answeredOrTimedOut = Object.entries(callbackAnswers)
      .filter(([answer]) => !/^status \d+$/.test(answer) || answer === 'status 200' || answer === 'status 409')
      .reduce((sum, [, n]) => sum + n, 0);
    expect(answeredOrTimedOut).toBeGreaterThanOrEqual((final['applied'] ?? 0) * TASKS_PER_RUN);
    expect(fleet.unexpectedExits).toEqual([]);
    expect(apiProcess.unexpectedExits).toEqual([]);
    expect(callbackApi.unexpectedExits).toEqual([]);
  }, 400_000);
  it('a run-created job that stalls twice (past maxStalledCount) fails in BullMQ; the sweeper still drives its run to the end', async () => {
    const testStarted = Date.now();
    const h = await harness({ TASK_PROGRESS_TIMEOUT_SECONDS: '45' });
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'stalled', 'callback');
    const runId = await createRun(h, fixture.organizationToken, fixture.workspaceId, { 'auto-apply': true });
    // Publish the run's event with a relay of our own (no worker yet, so nothing takes the job but us).
    const connection = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    onCleanup(() => connection.quit().catch(() => connection.disconnect()), 'stall connection');
    const queue = new Queue(QUEUES.runs, { connection, prefix: h.config.queuePrefix });
    onCleanup(() => queue.close(), 'stall queue');
    const relay = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 60_000, logger: h.logger });
    expect(await relay.drain()).toBe(1);

    // A "worker" that takes the job and dies holding it, twice: it never renews its lock (manual fetching),
    // and its stall check (short, so the test is quick) finds the lock expired each time.
    const crashing = new Worker(QUEUES.runs, null, {
      connection,
      prefix: h.config.queuePrefix,
      lockDuration: 300,
      stalledInterval: 200,
      maxStalledCount: 1,
      autorun: false,
    });
    onCleanup(() => crashing.close(true), 'crashing worker');
    const jobId = runCreatedJobId(runId);
    const stalledCounters: number[] = [];
    for (let crash = 1; crash <= 2; crash += 1) {
      const taken = await eventually(
        async () => (await crashing.getNextJob(`crash-${crash}-${randomAlphanumeric(8)}`)) ?? undefined,
        10_000,
        50,
      );
      expect(taken.id).toBe(jobId);
      if (crash === 1) await crashing.startStalledCheckTimer();
      // The stall check takes the job back (to waiting) once its lock expired.
      stalledCounters.push(
        await eventually(
          async () => {
            const job = await queue.getJob(jobId);
            return (await queue.getJobState(jobId)) === 'waiting' && job && job.stalledCounter >= crash ? job.stalledCounter : undefined;
          },
          15_000,
          50,
        ),
      );
    }
    await crashing.close(true);
    // Past maxStalledCount: BullMQ 6 marks the job to fail (a deferred failure) when a worker next takes it.
    const marked = await queue.getJob(jobId);
    expect(marked?.deferredFailure).toMatch(/stalled more than allowable limit/);
    const [pending] = await h.orm.em.fork().execute<{ status: string }[]>(`select status from runs where id = ?`, [runId]);
    expect(pending?.status).toBe('pending');

    // A real worker takes the job and fails it without running it; only the database knows the run must move.
    const fleet = new WorkerFleet(workerEnv(h));
    await fleet.start().started;
    const failedReason = await eventually(
      async () => ((await queue.getJobState(jobId)) === 'failed' ? ((await queue.getJob(jobId))?.failedReason ?? '') : undefined),
      30_000,
      50,
    );
    const final = await waitUntilAllFinal(h.orm, 1, 60_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const redis = redisClient(h.config.redisUrl);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);
    // The run.created job stayed failed: what moved the run was the sweeper's run.advance, not a retry of it.
    const stillFailed = await queue.getJobState(jobId);

    recordFigures(SUITE, 'stalledTwice', {
      runs: 1,
      tasksPerRun: TASKS_PER_RUN,
      stallsInjected: 2,
      stalledCounterAfterEachStall: stalledCounters.join(','),
      runCreatedJobFinalState: stillFailed,
      finalStatuses: final,
      taskServerPosts: ledger.posts,
      redispatches: ledger.posts - ledger.resultsPosted,
      lost: final['applied'] === 1 ? 0 : 1,
      stuck: 0,
      invariantViolations: check.violations.length + ledger.violations.length,
      durationMs: Date.now() - testStarted,
    });

    expect(stalledCounters).toEqual([1, 2]);
    expect(failedReason).toMatch(/stalled more than allowable limit/);
    expect(stillFailed).toBe('failed');
    expect(final).toEqual({ applied: 1 });
    expect(ledger.violations).toEqual([]);
    expect(ledger.resultsPosted).toBe(TASKS_PER_RUN);
    expect(check.violations).toEqual([]);
    expect(fleet.unexpectedExits).toEqual([]);
  }, 120_000);
  it('SIGTERM of a worker while it delivers: it finishes its jobs and exits 0, nothing stalls, no result is POSTed twice', async () => {
    const testStarted = Date.now();
    const h = await harness({ TASK_PROGRESS_TIMEOUT_SECONDS: '45' });
    // Slow acknowledgements keep POSTs in flight when the signal lands.
    const { fixture, servers, hmacKeys } = await setUpWorkload(h, 'sigterm', 'slow:300');
    const fleet = new WorkerFleet(workerEnv(h));
    const [victim] = [fleet.start(), fleet.start()];
    await Promise.all(fleet.all.map((worker) => worker.started));
    if (!victim) throw new Error('no worker');
    const eventsConnection = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    onCleanup(() => eventsConnection.quit().catch(() => eventsConnection.disconnect()), 'queue events connection');
    const queueEvents = new QueueEvents(QUEUES.runs, { connection: eventsConnection, prefix: h.config.queuePrefix });
    onCleanup(() => queueEvents.close(), 'queue events');
    await queueEvents.waitUntilReady();
    const stalledJobs: string[] = [];
    queueEvents.on('stalled', ({ jobId }) => stalledJobs.push(jobId));

    const runIds: string[] = [];
    const creating = createRuns(h, fixture, 40, 8, runIds);
    creating.catch(() => undefined);
    const inFlight = await eventually(
      async () => {
        const posts = inFlightPosts(servers);
        return posts >= 4 ? posts : undefined;
      },
      30_000,
      5,
    );
    victim.killedOnPurpose = true;
    const signalledAt = Date.now();
    victim.child.kill('SIGTERM');
    const exit = await within(
      victim.exited,
      30_000,
      () => `the worker did not exit within 30 s of SIGTERM:\n${victim.output().slice(-3000)}`,
    );
    const shutdownMs = Date.now() - signalledAt;
    await creating;
    const final = await waitUntilAllFinal(h.orm, runIds.length, 60_000, fleet);
    const ledger = await checkLedgers(h.orm, h.secrets, servers);
    const redis = redisClient(h.config.redisUrl);
    const check = await invariants(h.orm, redis, h.config.queuePrefix, [...hmacKeys, fixture.organizationToken, h.adminToken]);

    recordFigures(SUITE, 'sigterm', {
      runs: runIds.length,
      tasksPerRun: TASKS_PER_RUN,
      sigterms: 1,
      postsInFlightAtSignal: inFlight,
      exitCode: exit.code,
      shutdownMs,
      stalledJobsDetected: stalledJobs.length,
      taskServerPosts: ledger.posts,
      redispatches: ledger.posts - ledger.resultsPosted,
      finalStatuses: final,
      lost: runIds.length - (final['applied'] ?? 0),
      invariantViolations: check.violations.length + ledger.violations.length,
      durationMs: Date.now() - testStarted,
    });

    expect(exit).toEqual({ code: 0, signal: null });
    expect(stalledJobs).toEqual([]);
    expect(ledger.redelivered).toBe(0);
    expect(ledger.posts).toBe(runIds.length * TASKS_PER_RUN);
    expect(ledger.violations).toEqual([]);
    expect(final).toEqual({ applied: runIds.length });
    expect(check.violations).toEqual([]);
    expect(fleet.unexpectedExits).toEqual([]);
  }, 120_000);
});
