import { afterAll, beforeAll, expect } from '@jest/globals';
import { QUEUES } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { type RunTaskServer, startRunTaskServer } from '../../../../examples/run-task-server/server.ts';
import { uniqueName } from '../../../../test/support/assertions.ts';
import {
  api,
  attachTask,
  createTask,
  createWorkspace,
  eventually,
  type Fixture,
  seedOrganization,
} from '../../../../test/support/fixtures.ts';
import { type Harness, startHarness, TEST_SECRET_KEY } from '../../../../test/support/harness.ts';
import { ROOT, type TaskSetup, type TaskSpec, TIMINGS, type WorkerProcess } from './views.ts';
import { orchestrationReads } from './reads.ts';

/** The API, two worker processes, task servers and proxies, and the helpers that drive and read runs. */
export function useOrchestration() {
  const g = {} as {
    h: Harness;
    org: Fixture;
    overrideOrg: Fixture;
    queue: Queue;
    redis: Redis;
  };
  const workers: WorkerProcess[] = [];
  const servers: RunTaskServer[] = [];
  const proxies: Server[] = [];

  function spawnWorker(): WorkerProcess {
    const child = spawn(process.execPath, ['services/worker/src/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env['PATH'] ?? '',
        DATABASE_URL: g.h.config.databaseUrl,
        REDIS_URL: g.h.config.redisUrl,
        QUEUE_PREFIX: g.h.config.queuePrefix,
        SECRET_KEY: TEST_SECRET_KEY,
        PUBLIC_BASE_URL: g.h.config.publicBaseUrl,
        TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
        ...TIMINGS,
        LOG_LEVEL: 'warn',
        // No health/metrics listener: two workers (and other suites) would contend for the default port.
        WORKER_HEALTH_PORT: '0',
      },
    });
    const output: string[] = [];
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    return { child, output, exited };
  }

  /** Polls `check`; on timeout the error carries what the workers printed (they log at warn). */
  async function waitFor<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
    try {
      return await eventually(check, timeoutMs);
    } catch (error) {
      const logs = workers.map((worker, index) => `worker ${index}: ${worker.output.join('').slice(-2000) || '(no output)'}`).join('\n');
      throw new Error(`${what}: ${(error as Error).message}\n${logs}`, { cause: error });
    }
  }

  async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
    return g.h.orm.em.fork().getConnection().execute<T[]>(query, params);
  }

  async function taskServer(options: Parameters<typeof startRunTaskServer>[0]): Promise<RunTaskServer> {
    const server = await startRunTaskServer(options);
    servers.push(server);
    return server;
  }

  /** Forwards each run task request to `target` after `delayMs` (verification requests at once). */
  async function delayingProxy(target: string, delayMs: number): Promise<string> {
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const verification = body.includes('"access_token":"test-token"');
        const forward = (): void => {
          fetch(target, {
            method: 'POST',
            headers: {
              'content-type': String(req.headers['content-type'] ?? ''),
              'user-agent': String(req.headers['user-agent'] ?? ''),
              'x-tfc-task-signature': String(req.headers['x-tfc-task-signature'] ?? ''),
            },
            body,
          }).then(
            async (response) => res.writeHead(response.status, { 'content-type': 'application/json' }).end(await response.text()),
            () => res.writeHead(502).end(),
          );
        };
        if (verification) forward();
        else setTimeout(forward, delayMs);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
    proxies.push(proxy);
    return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/`;
  }

  /** A fresh workspace with one task per spec, each backed by its own task server. */
  async function workspaceWith(owner: Fixture, specs: TaskSpec[]): Promise<{ workspaceId: string; tasks: TaskSetup[] }> {
    const workspaceId = await createWorkspace(g.h, owner.organization, owner.organizationToken, uniqueName('ws'));
    const tasks: TaskSetup[] = [];
    for (const spec of specs) {
      const server = await taskServer({
        mode: spec.mode ?? 'callback',
        result: spec.result ?? 'passed',
        hmacKey: spec.hmacKey,
        callbackDelayMs: spec.callbackDelayMs,
        readPlan: spec.readPlan,
      });
      const url = spec.delayMs === undefined ? `${server.url}/run-task` : await delayingProxy(`${server.url}/run-task`, spec.delayMs);
      // Created through the API, so the verification request must reach a live server that signs alike.
      const taskId = await createTask(g.h, owner, url, { hmacKey: spec.hmacKey });
      await attachTask(g.h, owner, workspaceId, taskId, spec.enforcement, spec.stages);
      // Connection refused: nothing listens there any more.
      if (spec.destination === 'refused') await server.close();
      // A loopback address outside TASK_DESTINATION_ALLOWLIST (127.0.0.1/32): the destination guard refuses it.
      if (spec.destination === 'blocked') {
        await sql(`update run_tasks set url = ? where id = ?`, [`http://127.0.0.2:${server.port}/run-task`, taskId]);
      }
      tasks.push({ taskId, server });
    }
    return { workspaceId, tasks };
  }

  const reads = orchestrationReads(g, waitFor);

  beforeAll(async () => {
    g.h = await startHarness({ reachableBaseUrl: true, env: { ...TIMINGS } });
    g.org = await seedOrganization(g.h, uniqueName('e2e'));
    g.overrideOrg = await seedOrganization(g.h, uniqueName('e2e-override'));
    const enabled = await api(g.h, 'patch', `/organizations/${g.overrideOrg.organization}`, g.overrideOrg.organizationToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    });
    expect(enabled.status).toBe(200);
    expect(enabled.body.data.attributes['task-overrides-enabled']).toBe(true);
    g.redis = new Redis(g.h.config.redisUrl, { maxRetriesPerRequest: null });
    g.queue = new Queue(QUEUES.runs, { connection: g.redis, prefix: g.h.config.queuePrefix });
    workers.push(spawnWorker(), spawnWorker());
    // Both processes are consuming the queue before any run is created.
    await waitFor(async () => ((await g.queue.getWorkersCount()) >= 2 ? true : undefined), 'two workers to connect', 20_000);
  }, 40_000);

  afterAll(async () => {
    for (const worker of workers) worker.child.kill('SIGTERM');
    const exits = await Promise.all(workers.map((worker) => worker.exited));
    await Promise.all(servers.map((server) => server.close()));
    for (const proxy of proxies) proxy.closeAllConnections();
    await Promise.all(proxies.map((proxy) => new Promise<void>((resolve) => proxy.close(() => resolve()))));
    await g.queue?.close();
    g.redis?.disconnect();
    await g.h?.close();
    // A worker stops cleanly on SIGTERM (closes its queue, relay and database pool, exits 0).
    expect(exits).toEqual(workers.map(() => ({ code: 0, signal: null })));
  }, 30_000);
  return Object.assign(g, {
    workers,
    servers,
    proxies,
    spawnWorker,
    waitFor,
    sql,
    taskServer,
    delayingProxy,
    workspaceWith,
    ...reads,
  });
}
