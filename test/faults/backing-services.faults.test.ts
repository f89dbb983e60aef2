import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '@runtasks/shared/db';
import { Redis } from 'ioredis';
import { startRunTaskServer, type RunTaskServer } from '../../examples/run-task-server/server.ts';
import { startWorker, type RunningWorker } from '../../services/worker/src/worker.ts';
import { uniqueName } from '../support/assertions.ts';
import { TASKS_PER_RUN } from '../support/cluster.ts';
import { startFaultProxy, type FaultMode, type FaultProxy } from '../support/fault-proxy.ts';
import { recordFigures } from '../support/figures.ts';
import { api, createRun, createWorkspace, eventually, seedOrganization, type Fixture } from '../support/fixtures.ts';
import { withAdminClient } from '../support/databases.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { holdLock } from '../support/locks.ts';
import { checkInvariants, expectNoViolations } from '../support/invariants.ts';

/**
 * Backing-service faults: Redis and PostgreSQL slow, cut off, paused or exhausted.
 *
 * Redis reached through a TCP fault proxy that adds latency, becomes a blackhole, or resets every
 * connection, and Redis pausing every client (`CLIENT PAUSE`), while runs are being created by an API
 * with its operations. A run and its outbox event are written to PostgreSQL only; the API's own
 * publication of the job is never awaited and its rate limiter falls back to memory when Redis does not
 * answer, so creates must keep answering 2xx quickly; once the fault ends the worker resumes and every
 * run completes (the relay publishes whatever the API could not).
 *
 * PostgreSQL reached by the worker through the same proxy (latency, blackhole, reset), and PostgreSQL
 * terminating every connection to the database (API and worker) in the middle of creates: a create may
 * then answer 503 with Retry-After, never a 500, and every run answered 201 completes. Connection
 * exhaustion: a lock holds every connection of the API's pool, so requests beyond it wait past the checkout
 * timeout and answer 503, and the API serves again once the lock goes. Immediate stops and restarts of
 * PostgreSQL and Redis are in services/worker/test/crash-redis.int.test.ts and crash-postgres.int.test.ts.
 */

const SUITE = 'backing-services';
const RUNS_PER_FAULT = 5;
/** A create that takes longer than this during a Redis fault would mean the API waits on Redis. */
const CREATE_BOUND_MS = 5_000;

async function statusesOf(h: Harness, runIds: readonly string[]): Promise<string[]> {
  const rows = await h.orm.em.fork().getConnection().execute<{ status: string }[]>('select status from runs where id in (?)', [runIds]);
  return rows.map((row) => row.status);
}

/** `CLIENT PAUSE` on the real Redis (not through the proxy): every client's commands wait until it ends. */
async function pauseRedis(ms: number): Promise<void> {
  const redis = new Redis(process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0', { maxRetriesPerRequest: 1 });
  try {
    await redis.call('CLIENT', 'PAUSE', String(ms), 'ALL');
  } finally {
    redis.disconnect();
  }
}

/** Heals the proxy first, so the worker's clients close cleanly instead of waiting on a blackhole; then stops everything. */
async function tearDown(
  proxy: FaultProxy | undefined,
  worker: RunningWorker | undefined,
  workerOrm: MikroORM | undefined,
  servers: readonly RunTaskServer[],
  h: Harness | undefined,
): Promise<void> {
  proxy?.setMode({ kind: 'pass' });
  await worker?.close();
  await workerOrm?.close(true);
  await Promise.all(servers.map((server) => server.close()));
  await h?.close();
  await proxy?.stop();
}

/**
 * Workspaces with the workload's tasks attached, one per run: a run that waits at post_plan_completed
 * holds its workspace (the run queue), so two runs of these scenarios never share one.
 */
const spareWorkspaces: string[] = [];
const WORKSPACES = 40;

function takeWorkspace(): string {
  const workspaceId = spareWorkspaces.shift();
  if (workspaceId === undefined) throw new Error(`more than ${WORKSPACES} runs: seed more workspaces`);
  return workspaceId;
}

/** An organization with `tasks` mandatory post_plan tasks on example servers (kept in `servers`), attached to WORKSPACES workspaces. */
async function seedWorkload(h: Harness, servers: RunTaskServer[], tasks: number): Promise<Fixture> {
  const org = await seedOrganization(h, uniqueName('backing'));
  const taskIds: string[] = [];
  for (let index = 0; index < tasks; index += 1) {
    const server = await startRunTaskServer({});
    servers.push(server);
    const task = await api(h, 'post', `/organizations/${org.organization}/tasks`, org.organizationToken, {
      data: { type: 'tasks', attributes: { name: uniqueName('task'), url: server.url, category: 'task' } },
    });
    expect(task.status).toBe(201);
    taskIds.push(task.body.data.id as string);
  }
  spareWorkspaces.length = 0;
  for (let index = 0; index < WORKSPACES; index += 1) {
    const workspaceId =
      index === 0 ? org.workspaceId : await createWorkspace(h, org.organization, org.organizationToken, uniqueName('backing-ws'));
    for (const taskId of taskIds) {
      const attached = await api(h, 'post', `/workspaces/${workspaceId}/tasks`, org.organizationToken, {
        data: {
          type: 'workspace-tasks',
          attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
          relationships: { task: { data: { type: 'tasks', id: taskId } } },
        },
      });
      expect(attached.status).toBe(201);
    }
    spareWorkspaces.push(workspaceId);
  }
  return org;
}

describe('Redis behind a fault proxy: API writes stay 2xx, every run completes after the fault', () => {
  let proxy: FaultProxy;
  let h: Harness;
  let org: Fixture;
  let workerOrm: MikroORM;
  let worker: RunningWorker | undefined;
  const servers: RunTaskServer[] = [];

  beforeAll(async () => {
    proxy = await startFaultProxy({ targetPort: 6379 });
    // With its operations, as main.ts builds it: the API then rate-limits every request and publishes
    // each created run's job itself, both through the same faulty Redis.
    h = await startHarness({
      reachableBaseUrl: true,
      ops: true,
      // The limit still runs on every request; its budget only has to cover the set-up's 160 writes.
      env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}/0`, SWEEPER_INTERVAL_SECONDS: '0.5', RATE_LIMIT_PER_SECOND: '1000' },
    });
    org = await seedWorkload(h, servers, TASKS_PER_RUN);
    workerOrm = await openOrm(h.config.databaseUrl, 5);
    worker = await startWorker({ config: h.config, orm: workerOrm, logger: h.logger, secrets: h.secrets });
  }, 60_000);

  afterAll(() => tearDown(proxy, worker, workerOrm, servers, h), 60_000);

  const runStatuses = (runIds: readonly string[]): Promise<string[]> => statusesOf(h, runIds);

  const faults: { name: string; mode: FaultMode; holdMs: number; pause?: boolean }[] = [
    { name: 'redis latency 150 ms per chunk', mode: { kind: 'latency', latencyMs: 150 }, holdMs: 2_000 },
    { name: 'redis blackhole 3 s', mode: { kind: 'blackhole' }, holdMs: 3_000 },
    { name: 'redis reset of every connection', mode: { kind: 'reset' }, holdMs: 2_000 },
    // Server-wide, so other test files running now wait 2 s too; they have the time.
    { name: 'redis CLIENT PAUSE 2 s', mode: { kind: 'pass' }, holdMs: 2_000, pause: true },
  ];

  for (const fault of faults) {
    it(`${fault.name}: creates answer 2xx within the bound, runs complete after`, async () => {
      const faultStartedAt = Date.now();
      const resetsBefore = proxy.counters.connectionsReset;
      proxy.setMode(fault.mode);
      if (fault.pause) await pauseRedis(fault.holdMs);
      const statusClasses: Record<string, number> = {};
      const runIds: string[] = [];
      let maxCreateMs = 0;
      for (let index = 0; index < RUNS_PER_FAULT; index += 1) {
        const started = Date.now();
        const res = await api(h, 'post', '/runs', org.organizationToken, {
          data: {
            type: 'runs',
            attributes: { 'auto-apply': false },
            relationships: { workspace: { data: { type: 'workspaces', id: takeWorkspace() } } },
          },
        });
        maxCreateMs = Math.max(maxCreateMs, Date.now() - started);
        const statusClass = `${Math.floor(res.status / 100)}xx`;
        statusClasses[statusClass] = (statusClasses[statusClass] ?? 0) + 1;
        expect(res.status).toBe(201);
        runIds.push(res.body.data.id as string);
      }
      // The fault lasts at least holdMs whatever the creates took: a fixed delay that shapes the fault.
      const remaining = fault.holdMs - (Date.now() - faultStartedAt);
      if (remaining > 0) await new Promise((resolve) => setTimeout(resolve, remaining));
      proxy.setMode({ kind: 'pass' });
      const faultMs = Date.now() - faultStartedAt;

      const recoveryStartedAt = Date.now();
      await eventually(
        async () => {
          const statuses = await runStatuses(runIds);
          return statuses.length === runIds.length && statuses.every((status) => status === 'post_plan_completed') ? true : undefined;
        },
        60_000,
        200,
      );
      const recoveryMs = Date.now() - recoveryStartedAt;
      // One run outside the fault proves the path is fully back, not just drained.
      const after = await createRun(h, org.organizationToken, takeWorkspace(), { 'auto-apply': false });
      await eventually(async () => ((await runStatuses([after]))[0] === 'post_plan_completed' ? true : undefined), 30_000, 200);

      expect(maxCreateMs).toBeLessThan(CREATE_BOUND_MS);
      const counts = await expectNoViolations(h.orm, { runIds: [...runIds, after], quiescent: true });
      recordFigures(SUITE, fault.name, {
        runs: runIds.length + 1,
        tasksPerRun: TASKS_PER_RUN,
        faultsInjected: 1,
        faultMs,
        connectionsReset: proxy.counters.connectionsReset - resetsBefore,
        chunksHeld: proxy.counters.chunksHeld,
        responsesDuringFault: statusClasses,
        maxCreateMsDuringFault: maxCreateMs,
        recoveryMs,
        runsLost: 0,
        runsStuck: 0,
        invariantViolations: 0,
        invariantRunsChecked: counts.runs,
        invariantResultsChecked: counts.results,
      });
    }, 120_000);
  }
});

describe('PostgreSQL faults: the worker behind a fault proxy, every connection terminated; no 500, every run completes', () => {
  let proxy: FaultProxy;
  let h: Harness;
  let org: Fixture;
  let workerOrm: MikroORM;
  let worker: RunningWorker | undefined;
  const servers: RunTaskServer[] = [];

  beforeAll(async () => {
    h = await startHarness({ reachableBaseUrl: true, env: { SWEEPER_INTERVAL_SECONDS: '0.5' } });
    const direct = new URL(h.config.databaseUrl);
    proxy = await startFaultProxy({ targetHost: direct.hostname, targetPort: Number(direct.port || 5432) });
    org = await seedWorkload(h, servers, TASKS_PER_RUN);
    // The worker alone goes through the proxy (pool and LISTEN connection); the API and the checks connect directly.
    const viaProxy = new URL(h.config.databaseUrl);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    workerOrm = await openOrm(viaProxy.toString(), 5);
    worker = await startWorker({
      config: { ...h.config, databaseUrl: viaProxy.toString() },
      orm: workerOrm,
      logger: h.logger,
      secrets: h.secrets,
    });
  }, 60_000);

  afterAll(() => tearDown(proxy, worker, workerOrm, servers, h), 60_000);

  async function createRuns(count: number, statusClasses: Record<string, number>): Promise<{ runIds: string[]; unexpected: string[] }> {
    const runIds: string[] = [];
    const unexpected: string[] = [];
    for (let index = 0; index < count; index += 1) {
      const res = await api(h, 'post', '/runs', org.organizationToken, {
        data: {
          type: 'runs',
          attributes: { 'auto-apply': false },
          relationships: { workspace: { data: { type: 'workspaces', id: takeWorkspace() } } },
        },
      });
      const statusClass = String(res.status);
      statusClasses[statusClass] = (statusClasses[statusClass] ?? 0) + 1;
      if (res.status === 201) runIds.push(res.body.data.id as string);
      // 503 (with Retry-After) is the documented answer while the database is unreachable; nothing else is.
      else if (res.status !== 503 || res.headers['retry-after'] === undefined) unexpected.push(`${res.status} ${res.text.slice(0, 200)}`);
    }
    return { runIds, unexpected };
  }

  async function expectAllComplete(runIds: readonly string[]): Promise<number> {
    const startedAt = Date.now();
    try {
      await eventually(
        async () => {
          const statuses = await statusesOf(h, runIds);
          return statuses.length === runIds.length && statuses.every((status) => status === 'post_plan_completed') ? true : undefined;
        },
        60_000,
        200,
      );
    } catch (error) {
      // Say where they stopped: the run, stage and result statuses and the outbox, not just "timed out".
      const report = await checkInvariants(h.orm, { runIds, quiescent: true });
      const rows = await h.orm.em
        .fork()
        .getConnection()
        .execute(
          `select r.id, r.status, (select count(*) from outbox_events o where o.published_at is null) as unpublished,
                  (select json_agg(tr.status) from task_stages ts join task_results tr on tr.task_stage_id = ts.id where ts.run_id = r.id) as results
             from runs r where r.id in (?)`,
          [runIds],
        );
      const calls = servers.flatMap((server) =>
        server.requests
          .filter((record) => runIds.includes(record.payload?.run_id ?? ''))
          .map((record) => ({
            result: record.payload?.task_result_id,
            status: record.status,
            plan: record.plan,
            callbacks: record.callbacks.map(({ body: _body, ...call }) => call),
          })),
      );
      throw new Error(`${(error as Error).message}: ${JSON.stringify(rows)}\n${report.violations.join('\n')}\n${JSON.stringify(calls)}`, {
        cause: error,
      });
    }
    return Date.now() - startedAt;
  }

  const proxied: { name: string; mode: FaultMode; holdMs: number }[] = [
    { name: 'postgres latency 50 ms per chunk (worker)', mode: { kind: 'latency', latencyMs: 50 }, holdMs: 2_000 },
    { name: 'postgres blackhole 3 s (worker)', mode: { kind: 'blackhole' }, holdMs: 3_000 },
    { name: 'postgres reset of every worker connection', mode: { kind: 'reset' }, holdMs: 2_000 },
  ];
  for (const fault of proxied) {
    it(`${fault.name}: creates answer 201, runs complete after`, async () => {
      const faultStartedAt = Date.now();
      const resetsBefore = proxy.counters.connectionsReset;
      proxy.setMode(fault.mode);
      const statusClasses: Record<string, number> = {};
      const { runIds, unexpected } = await createRuns(RUNS_PER_FAULT, statusClasses);
      const remaining = fault.holdMs - (Date.now() - faultStartedAt);
      if (remaining > 0) await new Promise((resolve) => setTimeout(resolve, remaining));
      proxy.setMode({ kind: 'pass' });
      const faultMs = Date.now() - faultStartedAt;
      const recoveryMs = await expectAllComplete(runIds);

      expect(unexpected).toEqual([]);
      expect(runIds).toHaveLength(RUNS_PER_FAULT);
      const counts = await expectNoViolations(h.orm, { runIds, quiescent: true });
      recordFigures(SUITE, fault.name, {
        runs: runIds.length,
        tasksPerRun: TASKS_PER_RUN,
        faultsInjected: 1,
        faultMs,
        connectionsReset: proxy.counters.connectionsReset - resetsBefore,
        responsesDuringFault: statusClasses,
        recoveryMs,
        runsLost: 0,
        runsStuck: 0,
        invariantViolations: 0,
        invariantResultsChecked: counts.results,
      });
    }, 120_000);
  }

  it('postgres terminates every connection to the database (API and worker) between creates: 201 or 503, never 500; runs complete', async () => {
    const statusClasses: Record<string, number> = {};
    const runIds: string[] = [];
    const unexpected: string[] = [];
    let terminated = 0;
    for (let round = 0; round < 3; round += 1) {
      terminated += await withAdminClient(async (client) => {
        const { rows } = await client.query<{ n: string }>(
          `select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()`,
          [new URL(h.config.databaseUrl).pathname.slice(1)],
        );
        return Number(rows[0]?.n ?? 0);
      });
      const batch = await createRuns(RUNS_PER_FAULT, statusClasses);
      runIds.push(...batch.runIds);
      unexpected.push(...batch.unexpected);
    }
    const recoveryMs = await expectAllComplete(runIds);

    expect(unexpected).toEqual([]);
    expect(terminated).toBeGreaterThan(0);
    // The pools notice a dead connection and open another: most creates still succeed.
    expect(runIds.length).toBeGreaterThan(0);
    const counts = await expectNoViolations(h.orm, { runIds, quiescent: true });
    recordFigures(SUITE, 'postgres terminates every connection', {
      runs: runIds.length,
      tasksPerRun: TASKS_PER_RUN,
      faultsInjected: 3,
      connectionsTerminated: terminated,
      responses: statusClasses,
      recoveryMs,
      runsLost: 0,
      runsStuck: 0,
      invariantViolations: 0,
      invariantResultsChecked: counts.results,
    });
  }, 120_000);

  it('connection exhaustion: a lock holds every API connection; waiting requests answer 503 with Retry-After, never 500, and the API recovers', async () => {
    const runId = await createRun(h, org.organizationToken, takeWorkspace(), { 'auto-apply': false });
    await expectAllComplete([runId]);
    const before = await statusesOf(h, [runId]);
    const lockHeldMs = 7_000;
    const answers: Record<string, number> = {};
    const unexpected: string[] = [];
    // An operator's ACCESS EXCLUSIVE lock on runs: every request that reads a run waits on it while holding one
    // of the API's five connections; the rest wait for a connection until the pool's 5 s checkout timeout.
    const lock = await holdLock(h.config.databaseUrl, 'lock table runs in access exclusive mode');
    const locking = new Promise((resolve) => setTimeout(resolve, lockHeldMs)).then(() => lock.release());
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        const res = await api(h, 'get', `/runs/${runId}/task-stages`, org.organizationToken);
        answers[String(res.status)] = (answers[String(res.status)] ?? 0) + 1;
        if (res.status !== 200 && (res.status !== 503 || res.headers['retry-after'] === undefined))
          unexpected.push(`${res.status} ${res.text.slice(0, 200)}`);
      }),
    );
    await locking;
    const after = await api(h, 'get', `/runs/${runId}/task-stages`, org.organizationToken);

    expect(unexpected).toEqual([]);
    // The pool was exhausted (some waited past the checkout timeout), and the API serves again at once.
    expect(answers['503'] ?? 0).toBeGreaterThan(0);
    expect(after.status).toBe(200);
    expect(await statusesOf(h, [runId])).toEqual(before);
    await expectNoViolations(h.orm, { runIds: [runId], quiescent: true });
    recordFigures(SUITE, 'connection exhaustion (lock on runs)', {
      concurrentRequests: 12,
      poolSize: 5,
      lockHeldMs,
      responses: answers,
      serverErrors: 0,
      invariantViolations: 0,
    });
  }, 60_000);
});
