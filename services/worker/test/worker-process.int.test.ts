import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { QUEUES } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startRunTaskServer, type RunTaskServer } from '../../../examples/run-task-server/server.ts';
import { api, createRun, createWorkspace, eventually, seedOrganization, uniqueName, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, TEST_SECRET_KEY, type Harness } from '../../../test/support/harness.ts';
import { freePort, PrivateRedis, probe, readiness } from '../../../test/support/processes.ts';

/**
 * The standalone worker process (services/worker/src/main.ts): its health server follows Redis going
 * away and coming back, and SIGTERM under load finishes the active jobs and exits 0 without losing
 * any work (a replacement worker completes every run). Redis is a private redis-server of this file.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface WorkerProcess {
  child: ChildProcess;
  healthUrl: string;
  output: string[];
  exited: Promise<Exit>;
}

describe('the worker process', () => {
  let redis: PrivateRedis;
  let h: Harness;
  let org: Fixture;
  let queue: Queue;
  let queueRedis: Redis;
  const workers: WorkerProcess[] = [];
  const servers: RunTaskServer[] = [];

  async function spawnWorker(env: Record<string, string> = {}): Promise<WorkerProcess> {
    const port = await freePort();
    const child = spawn(process.execPath, ['services/worker/src/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env['PATH'] ?? '',
        NODE_ENV: 'test',
        HOST: '127.0.0.1',
        WORKER_HEALTH_PORT: String(port),
        DATABASE_URL: h.config.databaseUrl,
        REDIS_URL: redis.url,
        QUEUE_PREFIX: h.config.queuePrefix,
        SECRET_KEY: TEST_SECRET_KEY,
        PUBLIC_BASE_URL: h.config.publicBaseUrl,
        TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
        TASK_RETRY_DELAYS_SECONDS: '0.2,0.2',
        SWEEPER_INTERVAL_SECONDS: '1',
        OUTBOX_POLL_INTERVAL_MS: '200',
        LOG_LEVEL: 'warn',
        ...env,
      },
    });
    const output: string[] = [];
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const worker = { child, healthUrl: `http://127.0.0.1:${port}`, output, exited };
    workers.push(worker);
    await eventually(async () => {
      if (child.exitCode !== null) throw new Error(`the worker exited early (${child.exitCode}): ${output.join('')}`);
      return (await probe(`${worker.healthUrl}/healthz`)).status === 200 ? true : undefined;
    }, 20_000);
    return worker;
  }

  /** SIGTERM, then the exit within `timeoutMs` (or 'timeout'). */
  async function terminate(worker: WorkerProcess, timeoutMs: number): Promise<{ exit: Exit | 'timeout'; ms: number }> {
    const started = Date.now();
    worker.child.kill('SIGTERM');
    const exit = await Promise.race([
      worker.exited,
      new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), timeoutMs).unref()),
    ]);
    return { exit, ms: Date.now() - started };
  }

  beforeAll(async () => {
    redis = new PrivateRedis(await freePort());
    await redis.start();
    h = await startHarness({ reachableBaseUrl: true, env: { REDIS_URL: redis.url } });
    org = await seedOrganization(h, 'worker-process');
    queueRedis = new Redis(redis.url, { maxRetriesPerRequest: null });
    queueRedis.on('error', () => undefined);
    queue = new Queue(QUEUES.runs, { connection: queueRedis, prefix: h.config.queuePrefix });
    queue.on('error', () => undefined);
  }, 30_000);

  afterAll(async () => {
    await redis?.start();
    for (const worker of workers) if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
    await Promise.all(workers.map((worker) => worker.exited));
    await Promise.all(servers.map((server) => server.close()));
    await queue?.close();
    queueRedis?.disconnect();
    await h?.close();
    await redis?.stop();
  }, 30_000);

  it('serves /healthz, and /readyz follows Redis: 200, 503 naming redis while it is stopped, 200 once it is back', async () => {
    const worker = await spawnWorker();
    const health = await probe(`${worker.healthUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body ?? '')).toEqual({ status: 'ok' });
    const ready = await eventually(async () => {
      const result = await probe(`${worker.healthUrl}/readyz`);
      return result.status === 200 ? result : undefined;
    });
    // Redis names its mode and the node it talks to (docs/operations.md, "Redis: one node, Sentinel, Cluster").
    expect(readiness(ready)).toEqual({
      ready: true,
      components: {
        postgres: { ok: true },
        redis: { ok: true, mode: 'single', node: expect.stringMatching(/^127\.0\.0\.1:\d+$/) },
        draining: { ok: true },
      },
    });
    const metrics = await probe(`${worker.healthUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(/^process_cpu_seconds_total /m);
    expect(metrics.body).toMatch(/^queue_jobs\{queue="runs",state="waiting"\} \d+/m);

    try {
      await redis.stop();
      const down = await eventually(async () => {
        const result = await probe(`${worker.healthUrl}/readyz`);
        return result.status === 503 ? result : undefined;
      }, 10_000);
      const body = readiness(down);
      expect(body.ready).toBe(false);
      expect(body.components['redis']).toEqual({ ok: false, detail: expect.any(String) });
      expect(body.components['postgres']).toEqual({ ok: true });
      expect(body.components['draining']).toEqual({ ok: true });
      expect((await probe(`${worker.healthUrl}/healthz`)).status).toBe(200);
    } finally {
      await redis.start();
    }
    const up = await eventually(async () => {
      const result = await probe(`${worker.healthUrl}/readyz`);
      return result.status === 200 ? result : undefined;
    }, 15_000);
    expect(readiness(up).components['redis']).toEqual({ ok: true, mode: 'single', node: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });

    // With Redis back, SIGTERM stops it cleanly.
    const { exit } = await terminate(worker, 15_000);
    expect({ exit, output: exit === 'timeout' || exit.code !== 0 ? worker.output.join('').slice(-3000) : '' }).toEqual({
      exit: { code: 0, signal: null },
      output: '',
    });
  }, 60_000);

  it('finishes its active jobs on SIGTERM and exits 0; a replacement completes every run, nothing lost', async () => {
    const RUNS = 40;
    const server = await startRunTaskServer({ mode: 'slow:300' });
    servers.push(server);
    const task = await api(h, 'post', `/organizations/${org.organization}/tasks`, org.organizationToken, {
      data: { type: 'tasks', attributes: { name: 'slow-task', url: `${server.url}/run-task`, category: 'task' } },
    });
    expect(task.status).toBe(201);
    // A workspace per run: a run waiting for confirmation holds its workspace (the run queue), and these all wait.
    const workspaceIds: string[] = [];
    for (let index = 0; index < RUNS; index += 1) {
      const workspaceId =
        index === 0 ? org.workspaceId : await createWorkspace(h, org.organization, org.organizationToken, uniqueName('sigterm-ws'));
      const attached = await api(h, 'post', `/workspaces/${workspaceId}/tasks`, org.organizationToken, {
        data: {
          type: 'workspace-tasks',
          attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
          relationships: { task: { data: { type: 'tasks', id: task.body.data.id } } },
        },
      });
      expect(attached.status).toBe(201);
      workspaceIds.push(workspaceId);
    }

    const first = await spawnWorker({ WORKER_CONCURRENCY: '8' });
    const runIds: string[] = [];
    for (const workspaceId of workspaceIds) runIds.push(await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false }));

    // Under load: jobs are active, among them deliveries the task server has not answered yet.
    const runRequests = () => server.requests.filter((request) => !request.verification);
    const inFlight = await eventually(
      async () => {
        const pending = runRequests().filter((request) => request.status === undefined);
        return pending.length > 0 && (await queue.getActiveCount()) > 0 ? pending : undefined;
      },
      20_000,
      10,
    );
    expect(runRequests().filter((request) => request.status === 200).length).toBeLessThan(RUNS);

    const { exit, ms } = await terminate(first, 15_000);
    expect({ exit, output: exit === 'timeout' || exit.code !== 0 ? first.output.join('').slice(-3000) : '' }).toEqual({
      exit: { code: 0, signal: null },
      output: '',
    });
    expect(ms).toBeLessThan(15_000);
    // Graceful: the deliveries in flight at SIGTERM were seen through, and no job was left active
    // (nothing for the stall check to recover).
    expect(inFlight.map((request) => request.status)).toEqual(inFlight.map(() => 200));
    expect(await queue.getActiveCount()).toBe(0);

    await spawnWorker();
    type Doc = { id: string; attributes: Record<string, unknown>; relationships: Record<string, { data: { id: string }[] }> };
    const unfinished = async (): Promise<string[]> => {
      const left: string[] = [];
      for (const runId of runIds) {
        const res = await api(h, 'get', `/runs/${runId}/task-stages?include=task_results`, org.organizationToken);
        const run = await api(h, 'get', `/runs/${runId}`, org.organizationToken);
        const stages = res.body.data as Doc[];
        const results = ((res.body.included ?? []) as Doc[]).filter((doc) => doc.attributes['status'] !== undefined);
        const final =
          run.body.data.attributes.status === 'post_plan_completed' &&
          stages.length === 1 &&
          stages.every((stage) => stage.attributes['status'] === 'passed' && stage.relationships['task-results']?.data.length === 1) &&
          results.length === 1 &&
          results.every((result) => result.attributes['status'] === 'passed');
        if (!final) left.push(runId);
      }
      return left;
    };
    let left: string[] = runIds;
    try {
      await eventually(
        async () => {
          left = await unfinished();
          return left.length === 0 ? true : undefined;
        },
        40_000,
        250,
      );
    } catch (error) {
      throw new Error(`${left.length} of ${RUNS} runs unfinished: ${left.slice(0, 5).join(', ')}`, { cause: error });
    }
    // Every run's result was delivered and acknowledged.
    const delivered = new Set(
      server.requests.filter((request) => !request.verification && request.status === 200).map((request) => request.payload?.run_id),
    );
    expect(runIds.filter((runId) => !delivered.has(runId))).toEqual([]);
  }, 120_000);
});
