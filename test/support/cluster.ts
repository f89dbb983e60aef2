import type { MikroORM } from '@mikro-orm/postgresql';
import { loadConfig } from '@runtasks/shared/config';
import { createLogger } from '@runtasks/shared/logger';
import { FINAL_RUN_STATUSES, randomAlphanumeric, type RunStatus } from '@runtasks/shared/domain';
import { migrateUp, openOrm } from '@runtasks/shared/db';
import { pingRedis } from '@runtasks/shared/queue';
import { createTaskClient } from '@runtasks/shared/outbound';
import { CALLBACK_TOKEN_PREFIX, createSecretBox, type SecretBox } from '@runtasks/shared/security';
import { UNRECORDED_ATTEMPT } from '@runtasks/shared/engine';
import { Redis } from 'ioredis';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { expect } from '@jest/globals';
import { buildApp } from '../../services/api/src/app.ts';
import { issueToken } from '../../services/api/src/auth/tokens.ts';
import {
  startRunTaskServer,
  type RunTaskMode,
  type RunTaskServer,
  type RunTaskServerOptions,
} from '../../examples/run-task-server/server.ts';
import { api, createWorkspace, eventually, seedOrganization, type Fixture } from './fixtures.ts';
import { startHarness, TEST_SECRET_KEY, type Harness } from './harness.ts';
import { checkInvariants } from './invariants.ts';
import { freePort } from './processes.ts';

/**
 * Process machinery for fault tests (crash tests, process faults): a cleanup registry, worker and API
 * processes started from the sources and killed on purpose, private PostgreSQL and Redis instances,
 * a standard workload (N tasks on example task servers) and the checks that end every scenario
 * (all runs final, the task servers' ledgers, the invariants). Each test file gets its own copy of the
 * module state (Jest isolates modules per file), so the cleanup registry is per file.
 */

const WORKER_MAIN = new URL('../../services/worker/src/main.ts', import.meta.url).pathname;
const API_MAIN = new URL('../../services/api/src/main.ts', import.meta.url).pathname;
const PG_BIN = '/usr/lib/postgresql/15/bin';
/** Three tasks per run: the workload of the crash tests and of the acceptance scenario. */
export const TASKS_PER_RUN = 3;
/** Short retries so a failed delivery is retried (and capped) within seconds. */
export const RETRY_DELAYS_SECONDS = '0.2,0.2';
/** One first attempt plus one per retry delay. */
export const ATTEMPT_CAP = RETRY_DELAYS_SECONDS.split(',').length + 1;
/** The token the task servers' verification requests carry (never a result's own). */
const VERIFICATION_TOKEN = 'test-token';

const run = promisify(execFile);

// ---------------------------------------------------------------------------------------------
// Bookkeeping: everything started is stopped (call runCleanups in afterEach, and in afterAll as a backstop).

export type Cleanup = () => Promise<unknown> | unknown;
const cleanups: { label: string; cleanup: Cleanup }[] = [];
/** Registers something to stop; runCleanups runs them newest first. */
export const onCleanup = (cleanup: Cleanup, label = 'cleanup'): void => {
  cleanups.push({ label, cleanup });
};
/**
 * Runs every cleanup, newest first; one that fails or hangs (10 s) does not keep the others from
 * running, and those not reached (the hook timed out) are left for afterAll.
 */
export async function runCleanups(): Promise<void> {
  for (let next = cleanups.pop(); next; next = cleanups.pop()) {
    const { label, cleanup } = next;
    const started = Date.now();
    try {
      await within(Promise.resolve().then(cleanup), 10_000, () => `${label} did not finish within 10 s`);
    } catch (error) {
      process.stderr.write(`cleanup "${label}" (${Date.now() - started} ms): ${String(error)}\n`);
    }
  }
}

export function within<T>(promise: Promise<T>, ms: number, message: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------
// Worker processes (`node services/worker/src/main.ts`), killed on purpose or watched for crashes.

export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  /** Resolves when the worker logged "worker started". */
  started: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  killedOnPurpose: boolean;
  output(): string;
  /** The `msg` of every log line so far, in order. */
  messages: string[];
}

export class WorkerFleet {
  readonly all: WorkerProcess[] = [];
  /** Exits nobody asked for (INV-11: zero unplanned process exits). */
  readonly unexpectedExits: string[] = [];
  private count = 0;
  private readonly env: Record<string, string>;

  constructor(env: Record<string, string>) {
    this.env = env;
    onCleanup(() => this.stop(), 'workers');
  }

  start(): WorkerProcess {
    this.count += 1;
    const name = `worker-${this.count}`;
    const child = spawn(process.execPath, [WORKER_MAIN], {
      env: { PATH: process.env['PATH'] ?? '', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const append = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-64 * 1024);
    };
    let markStarted: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (markStarted = resolve));
    const messages: string[] = [];
    let partial = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      append(chunk);
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        try {
          const msg = (JSON.parse(line) as { msg?: unknown }).msg;
          if (typeof msg === 'string') messages.push(msg);
          if (msg === 'worker started') markStarted();
        } catch {
          // Not a log line.
        }
      }
    });
    child.stderr?.on('data', append);
    const worker: WorkerProcess = {
      name,
      child,
      killedOnPurpose: false,
      messages,
      output: () => output,
      started: Promise.resolve(),
      exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
    };
    worker.started = within(
      Promise.race([started, worker.exited.then(({ code, signal }) => Promise.reject(new Error(`${name} exited (${code ?? signal})`)))]),
      30_000,
      () => `${name} did not start within 30 s:\n${output.slice(-4000)}`,
    );
    worker.started.catch(() => undefined);
    void worker.exited.then(({ code, signal }) => {
      if (!worker.killedOnPurpose) this.unexpectedExits.push(`${name} exited (code ${code}, signal ${signal}):\n${output.slice(-4000)}`);
    });
    this.all.push(worker);
    return worker;
  }

  live(): WorkerProcess[] {
    return this.all.filter((worker) => !worker.killedOnPurpose && worker.child.exitCode === null && worker.child.signalCode === null);
  }

  async kill9(worker: WorkerProcess): Promise<void> {
    worker.killedOnPurpose = true;
    worker.child.kill('SIGKILL');
    await worker.exited;
  }

  /** SIGTERM (graceful close), SIGKILL after 5 s. */
  async stop(): Promise<void> {
    await Promise.all(
      this.all
        .filter((worker) => worker.child.exitCode === null && worker.child.signalCode === null)
        .map(async (worker) => {
          worker.killedOnPurpose = true;
          worker.child.kill('SIGTERM');
          await within(worker.exited, 5_000, () => 'no exit').catch(async () => {
            worker.child.kill('SIGKILL');
            await worker.exited;
          });
        }),
    );
  }

  tails(): string {
    return this.all.map((worker) => `--- ${worker.name}\n${worker.output().slice(-3000)}`).join('\n');
  }
}

/** The environment of a worker process against the harness's database and queue, with short sweeps, retries and polls. */
export function workerEnv(h: Harness, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: h.config.databaseUrl,
    REDIS_URL: h.config.redisUrl,
    QUEUE_PREFIX: h.config.queuePrefix,
    PUBLIC_BASE_URL: h.config.publicBaseUrl,
    SECRET_KEY: TEST_SECRET_KEY,
    TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
    SWEEPER_INTERVAL_SECONDS: '0.5',
    TASK_RETRY_DELAYS_SECONDS: RETRY_DELAYS_SECONDS,
    // Longer than the dispatch lease (30 s): a claim lost with a killed worker is re-driven before its deadline.
    TASK_PROGRESS_TIMEOUT_SECONDS: '45',
    OUTBOX_POLL_INTERVAL_MS: '200',
    LOG_LEVEL: 'info',
    // Several workers on one machine: no health listener (it would want the same port).
    WORKER_HEALTH_PORT: '0',
    ...extra,
  };
}

// ---------------------------------------------------------------------------------------------
// Workload: an organization whose workspace runs three mandatory post_plan tasks, each on its own
// example task server with its own HMAC key; runs auto-apply, so they go to completion (`applied`).

export interface Workload {
  fixture: Fixture;
  servers: RunTaskServer[];
  hmacKeys: string[];
  /** Every workspace with the tasks attached (the fixture's first): loads spread their runs over them. */
  workspaceIds: string[];
}

/**
 * Workspaces a workload spreads its runs over. One run at a time holds a workspace (the run queue), so
 * a load on a single workspace would run one run after the other; spread, runs go side by side.
 */
export const WORKLOAD_WORKSPACES = 40;
const workloadWorkspaces = new WeakMap<Fixture, string[]>();
/** Where a fixture's next run goes: loads go on round the workspaces from one call to the next, so a burst finds the workspaces the last one used least recently. */
const workloadCursors = new WeakMap<Fixture, number>();
/** The workspaces of a workload's fixture (the fixture's own workspace alone for any other fixture). */
export const workspacesOf = (fixture: Fixture): string[] => workloadWorkspaces.get(fixture) ?? [fixture.workspaceId];

/** An organization, `tasks` example task servers in `mode` and their tasks, attached to the workspace as mandatory post_plan. */
export async function setUpWorkload(
  h: Harness,
  name: string,
  mode: RunTaskMode,
  tasks = TASKS_PER_RUN,
  serverOptions: Pick<RunTaskServerOptions, 'timeoutMs' | 'retries'> = {},
  workspaces = WORKLOAD_WORKSPACES,
): Promise<Workload> {
  const fixture = await seedOrganization(h, name);
  const servers: RunTaskServer[] = [];
  const hmacKeys: string[] = [];
  const workspaceIds = [fixture.workspaceId];
  for (let index = 1; index < workspaces; index += 1)
    workspaceIds.push(await createWorkspace(h, fixture.organization, fixture.organizationToken, `${name}-ws-${index}`));
  for (let i = 0; i < tasks; i += 1) {
    const hmacKey = `hmac-${name}-${i}-${randomAlphanumeric(24)}`;
    const server = await startRunTaskServer({ hmacKey, mode, result: 'passed', ...serverOptions });
    onCleanup(() => server.close(), 'task server');
    servers.push(server);
    hmacKeys.push(hmacKey);
    const task = await api(h, 'post', `/organizations/${fixture.organization}/tasks`, fixture.organizationToken, {
      data: { type: 'tasks', attributes: { name: `${name}-task-${i}`, url: server.url, category: 'task', 'hmac-key': hmacKey } },
    });
    expect(task.status).toBe(201);
    for (const workspaceId of workspaceIds) {
      const association = await api(h, 'post', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken, {
        data: {
          type: 'workspace-tasks',
          attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
          relationships: { task: { data: { type: 'tasks', id: task.body.data.id as string } } },
        },
      });
      expect(association.status).toBe(201);
    }
  }
  workloadWorkspaces.set(fixture, workspaceIds);
  return { fixture, servers, hmacKeys, workspaceIds };
}

/** Creates `count` auto-apply runs over the fixture's workspaces in turn, `concurrency` at a time; every answer must be 201. Returns the latencies. */
export async function createRuns(h: Harness, fixture: Fixture, count: number, concurrency: number, into: string[]): Promise<number[]> {
  const latencies: number[] = [];
  const workspaceIds = workspacesOf(fixture);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const cursor = workloadCursors.get(fixture) ?? 0;
      workloadCursors.set(fixture, cursor + 1);
      const workspaceId = workspaceIds[cursor % workspaceIds.length];
      next += 1;
      const started = performance.now();
      const res = await api(h, 'post', '/runs', fixture.organizationToken, {
        data: {
          type: 'runs',
          attributes: { message: `crash load ${into.length}`, 'auto-apply': true },
          relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } },
        },
      });
      latencies.push(performance.now() - started);
      if (res.status !== 201) throw new Error(`create run: ${res.status} ${res.text}`);
      into.push(res.body.data.id as string);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return latencies;
}

/** Counts every response the API sends (INV-11: no 5xx but 503); `failures` names the requests answered with another 5xx. */
export function watchStatuses(server: Server): Map<number, number> & { failures: string[] } {
  const statuses = Object.assign(new Map<number, number>(), { failures: [] as string[] });
  server.on('request', (req, res) => {
    res.once('finish', () => {
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      if (res.statusCode >= 500 && res.statusCode !== 503) statuses.failures.push(`${req.method} ${req.url} → ${res.statusCode}`);
    });
  });
  return statuses;
}
export const serverErrorsBut503 = (statuses: Map<number, number>): Record<string, number> =>
  Object.fromEntries([...statuses].filter(([status]) => status >= 500 && status !== 503));

export async function statusCounts(orm: MikroORM): Promise<Record<string, number>> {
  const rows = await orm.em
    .fork()
    .execute<{ status: string; n: string | number }[]>(`select status, count(*) as n from runs group by status`);
  return Object.fromEntries(rows.map((row) => [row.status, Number(row.n)]));
}

/** Polls until every run is in a final status; on timeout, fails with the status breakdown and the workers' last output. */
export async function waitUntilAllFinal(
  orm: MikroORM,
  total: number,
  timeoutMs: number,
  fleet: WorkerFleet,
): Promise<Record<string, number>> {
  try {
    return await eventually(
      async () => {
        const counts = await statusCounts(orm);
        const final = Object.entries(counts)
          .filter(([status]) => FINAL_RUN_STATUSES.has(status as RunStatus))
          .reduce((sum, [, n]) => sum + n, 0);
        return final === total ? counts : undefined;
      },
      timeoutMs,
      250,
    );
  } catch (error) {
    throw new Error(`runs not all final within ${timeoutMs} ms: ${JSON.stringify(await statusCounts(orm))}\n${fleet.tails()}`, {
      cause: error,
    });
  }
}

/** Runs that did not reach `applied`, with their results, for a readable failure. */
export async function notApplied(orm: MikroORM): Promise<unknown[]> {
  return orm.em.fork().execute(
    `select r.id, r.status, json_agg(json_build_object('id', tr.id, 'status', tr.status, 'attempts', tr.attempts,
            'acknowledged', tr.acknowledged_at is not null, 'message', tr.message) order by tr.id) as results
       from runs r left join task_stages ts on ts.run_id = r.id left join task_results tr on tr.task_stage_id = ts.id
      where r.status <> 'applied' group by r.id, r.status order by r.id`,
  );
}

export interface LedgerSummary {
  posts: number;
  resultsPosted: number;
  /** Results POSTed more than once (a retry or a re-dispatch after a crash). */
  redelivered: number;
  maxPostsPerResult: number;
  violations: string[];
}

/**
 * INV-9 over the task servers' ledgers: every POST verifies with its server's key; all POSTs for a
 * result carry its id and one access token (the result's own); at most ATTEMPT_CAP of them; and every
 * result that was dispatched or reported was POSTed at least once, to its own task's server.
 */
export async function checkLedgers(
  orm: MikroORM,
  secrets: SecretBox,
  servers: readonly RunTaskServer[],
  attemptCap = ATTEMPT_CAP,
): Promise<LedgerSummary> {
  const rows = await orm.em.fork().execute<
    {
      id: string;
      task_url: string;
      status: string;
      attempts: number;
      callback_token_hash: string | null;
      /** Every attempt claimed, none answered, and the progress deadline came before the last claim's lease ran out. */
      orphaned_until_deadline: boolean;
    }[]
  >(
    `select tr.id, tr.task_url, tr.status, tr.attempts, tr.callback_token_hash,
            (tr.status = 'errored' and tr.progress_deadline <= tr.next_attempt_at
             and not exists (select 1 from delivery_attempts da where da.task_result_id = tr.id and da.error_kind <> '${UNRECORDED_ATTEMPT}'))
              as orphaned_until_deadline
       from task_results tr`,
  );
  const byId = new Map(rows.map((row) => [row.id, row]));
  const summary: LedgerSummary = { posts: 0, resultsPosted: 0, redelivered: 0, maxPostsPerResult: 0, violations: [] };
  const posted = new Set<string>();
  for (const server of servers) {
    const groups = new Map<string, RunTaskServer['requests']>();
    for (const record of server.requests) {
      if (record.method !== 'POST' || record.verification) continue;
      summary.posts += 1;
      if (!record.payload) {
        summary.violations.push(`${server.url}: a POST whose body is not a run task payload`);
        continue;
      }
      if (!record.signatureVerified)
        summary.violations.push(`${server.url}: POST for ${record.payload.task_result_id} has a bad signature`);
      const group = groups.get(record.payload.task_result_id) ?? [];
      group.push(record);
      groups.set(record.payload.task_result_id, group);
    }
    for (const [id, group] of groups) {
      posted.add(id);
      summary.resultsPosted += 1;
      summary.maxPostsPerResult = Math.max(summary.maxPostsPerResult, group.length);
      if (group.length > 1) summary.redelivered += 1;
      if (group.length > attemptCap) summary.violations.push(`result ${id}: ${group.length} POSTs, more than the cap of ${attemptCap}`);
      const row = byId.get(id);
      if (!row) {
        summary.violations.push(`${server.url}: POST for unknown task result ${id}`);
        continue;
      }
      if (row.task_url !== server.url) summary.violations.push(`result ${id} (task ${row.task_url}) was POSTed to ${server.url}`);
      const tokens = new Set(group.map((record) => record.payload?.access_token));
      if (tokens.size !== 1) summary.violations.push(`result ${id}: ${tokens.size} different access tokens over ${group.length} POSTs`);
      const [token] = tokens;
      // The result's own: the one stored for it (planned before tokens were derived), or else the one derived from its id.
      const own =
        row.callback_token_hash === null
          ? secrets.derivedSubject(token ?? '', CALLBACK_TOKEN_PREFIX) === id
          : row.callback_token_hash === secrets.hashToken(token ?? '');
      if (!token || token === VERIFICATION_TOKEN || !own)
        summary.violations.push(`result ${id}: the access token sent is not the result's own`);
    }
  }
  for (const row of rows) {
    const reported = row.status === 'passed' || row.status === 'failed';
    // A worker killed between its claim and its POST leaves an attempt claimed and never made; the sweeper
    // re-drives it once the claim's lease runs out. Only a progress deadline shorter than that lease (a
    // test's setting) can end the result first: then it was never dispatched, and nothing was lost.
    if ((reported || (row.attempts > 0 && !row.orphaned_until_deadline)) && !posted.has(row.id))
      summary.violations.push(`result ${row.id} (${row.status}, ${row.attempts} attempts claimed) was never POSTed`);
  }
  return summary;
}

/** POSTs the task servers received and have not answered yet. */
export const inFlightPosts = (servers: readonly RunTaskServer[]): number =>
  servers.reduce(
    (sum, server) =>
      sum + server.requests.filter((record) => record.method === 'POST' && !record.verification && record.status === undefined).length,
    0,
  );

/** A client for the scans at the end; disconnected by the cleanups. */
export function redisClient(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  onCleanup(() => client.quit().catch(() => client.disconnect()), 'redis client');
  return client;
}

/** Deletes the queue's keys from a shared Redis (the workers are stopped by then). */
export async function deleteQueueKeys(url: string, prefix: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await client.del(...keys);
    } while (cursor !== '0');
  } finally {
    await client.quit().catch(() => client.disconnect());
  }
}

/** A harness (cloned database, unique queue prefix, API in-process) stopped and whose queue keys are deleted by the cleanups. */
export async function harness(env: Record<string, string>): Promise<Harness> {
  const h = await startHarness({ reachableBaseUrl: true, env });
  onCleanup(() => h.close(), 'harness');
  onCleanup(() => deleteQueueKeys(h.config.redisUrl, h.config.queuePrefix), 'queue keys');
  return h;
}

/** The invariants once the system is quiet, with the queue scan and the secrets that must appear nowhere in Redis. */
export async function invariants(source: MikroORM, redis: Redis, prefix: string, secrets: string[]) {
  return checkInvariants(source, { quiescent: true, graceSeconds: 5, queue: { redis, prefix }, secrets });
}

// ---------------------------------------------------------------------------------------------
// Private backing services.

export interface PrivateRedis {
  url: string;
  start(): Promise<void>;
  kill(): Promise<void>;
}

/** A redis-server of the test's own without persistence (a restart comes back empty); killed by the cleanups. */
export function privateRedis(port: number): PrivateRedis {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const url = `redis://127.0.0.1:${port}/0`;
  const kill = async (): Promise<void> => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };
  onCleanup(kill, 'private redis');
  return {
    url,
    kill,
    async start() {
      // No persistence: a restart comes back empty, so every job in it is lost.
      child = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
        {
          stdio: 'ignore',
        },
      );
      const current = child;
      exited = new Promise((resolve) => current.once('exit', () => resolve()));
      await eventually(
        () =>
          pingRedis(url, 500).then(
            () => true,
            () => undefined,
          ),
        10_000,
        50,
      );
    },
  };
}

export interface PrivatePostgres {
  port: number;
  url(database: string): string;
  start(): Promise<void>;
  stopImmediate(): Promise<void>;
}

const asPostgres = (dir: string, command: string, args: string[]) =>
  run('runuser', ['-u', 'postgres', '--', join(PG_BIN, command), ...args], { cwd: dir, timeout: 60_000 });

/** A PostgreSQL cluster of the test's own (initdb in a temporary directory, run as postgres), stopped and removed by the cleanups. */
export async function privatePostgres(): Promise<PrivatePostgres> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'rt-crash-pg-'));
  const data = join(dir, 'data');
  onCleanup(() => rm(dir, { recursive: true, force: true }), 'postgres directory');
  onCleanup(() => asPostgres(dir, 'pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined), 'private postgres');
  await run('chown', ['postgres:postgres', dir]);
  await asPostgres(dir, 'initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  return {
    port,
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    start: async () => {
      await asPostgres(dir, 'pg_ctl', ['-D', data, '-l', join(dir, 'postgres.log'), '-w', '-t', '60', '-o', options, 'start']);
    },
    stopImmediate: async () => {
      await asPostgres(dir, 'pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The API in-process against a private cluster.

/** The API of the harness, against an explicit database (the private cluster), listening on loopback. */
export async function apiAgainst(databaseUrl: string, env: Record<string, string>): Promise<Harness> {
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: databaseUrl,
    REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0',
    SECRET_KEY: TEST_SECRET_KEY,
    QUEUE_PREFIX: `test-${randomAlphanumeric(10)}`,
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    PUBLIC_BASE_URL: 'http://runtasks.test',
    TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
    ...env,
  });
  const orm = await openOrm(config.databaseUrl, 5);
  onCleanup(() => orm.close(), 'orm');
  await migrateUp(orm);
  const secrets = createSecretBox(TEST_SECRET_KEY);
  const logger = createLogger(config.logLevel, 'test');
  const taskClient = createTaskClient({ allowlist: config.taskDestinationAllowlist });
  onCleanup(() => taskClient.close(), 'task client');
  const app = buildApp({ config, orm, secrets, logger, taskClient });
  const server: Server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  onCleanup(() => new Promise((resolve) => server.close(resolve)), 'api server');
  onCleanup(() => deleteQueueKeys(config.redisUrl, config.queuePrefix), 'queue keys');
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  Object.assign(config, { publicBaseUrl: baseUrl });
  const { secret: adminToken } = await issueToken(orm.em.fork(), secrets, { kind: 'admin', description: 'crash test' });
  const started = {
    config,
    orm,
    secrets,
    logger,
    taskClient,
    server,
    baseUrl,
    http: request(server),
    adminToken,
    ops: undefined,
    // Everything above is stopped by the cleanups.
    close: async () => undefined,
  };
  return started as Harness;
}

// ---------------------------------------------------------------------------------------------
// The API in its own process (`node services/api/src/main.ts --role api`), so a test can kill -9 it.

export interface ApiProcessOptions {
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  /** A site-admin token to create on start (the API needs one to exist). */
  adminToken: string;
  extraEnv?: Record<string, string>;
  /** Node's own options before the entry point (e.g. `--import` of the statement counter). */
  nodeArgs?: string[];
}

/**
 * One API process at a time on a fixed loopback port (so PUBLIC_BASE_URL, which payloads carry for
 * callbacks, stays valid across restarts). `kill9` and `start` again to simulate a crash; every exit
 * not asked for is in `unexpectedExits`. Stopped by the cleanups.
 */
export class ApiProcess {
  readonly port: number;
  readonly baseUrl: string;
  readonly unexpectedExits: string[] = [];
  /** The `msg` of every log line of every start so far, in order. */
  readonly messages: string[] = [];
  starts = 0;
  private child: ChildProcess | undefined;
  private exited: Promise<unknown> = Promise.resolve();
  private killedOnPurpose = false;
  private output = '';
  private readonly options: ApiProcessOptions;

  private constructor(port: number, options: ApiProcessOptions) {
    this.port = port;
    this.baseUrl = `http://127.0.0.1:${port}`;
    this.options = options;
    onCleanup(() => this.stop(), 'api process');
  }

  static async create(options: ApiProcessOptions): Promise<ApiProcess> {
    return new ApiProcess(await freePort(), options);
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends the running process a signal (e.g. SIGUSR2: the statement counter writes its counts). */
  signal(signal: NodeJS.Signals): void {
    this.child?.kill(signal);
  }

  /** Starts the process and resolves once it logged "listening" (30 s at most). */
  async start(): Promise<void> {
    this.starts += 1;
    this.killedOnPurpose = false;
    const child = spawn(process.execPath, [...(this.options.nodeArgs ?? []), API_MAIN, '--role', 'api'], {
      env: {
        PATH: process.env['PATH'] ?? '',
        NODE_ENV: 'test',
        HOST: '127.0.0.1',
        PORT: String(this.port),
        PUBLIC_BASE_URL: this.baseUrl,
        DATABASE_URL: this.options.databaseUrl,
        REDIS_URL: this.options.redisUrl,
        QUEUE_PREFIX: this.options.queuePrefix,
        SECRET_KEY: TEST_SECRET_KEY,
        ADMIN_TOKEN: this.options.adminToken,
        TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
        // Load tests create thousands of runs with one token: no rate limit.
        RATE_LIMIT_PER_SECOND: '0',
        SHUTDOWN_DRAIN_DELAY_MS: '0',
        LOG_LEVEL: 'info',
        ...this.options.extraEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    const name = `api-${this.starts}`;
    let markListening: () => void = () => undefined;
    const listening = new Promise<void>((resolve) => (markListening = resolve));
    let partial = '';
    const append = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-64 * 1024);
    };
    child.stdout?.on('data', (chunk: Buffer) => {
      append(chunk);
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        try {
          const msg = (JSON.parse(line) as { msg?: unknown }).msg;
          if (typeof msg === 'string') this.messages.push(msg);
          if (msg === 'listening') markListening();
        } catch {
          // Not a log line.
        }
      }
    });
    child.stderr?.on('data', append);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    this.exited = exited;
    void exited.then(({ code, signal }) => {
      if (!this.killedOnPurpose) this.unexpectedExits.push(`${name} exited (code ${code}, signal ${signal}):\n${this.output.slice(-4000)}`);
    });
    await within(
      Promise.race([listening, exited.then(({ code, signal }) => Promise.reject(new Error(`${name} exited (${code ?? signal})`)))]),
      30_000,
      () => `${name} did not listen within 30 s:\n${this.output.slice(-4000)}`,
    );
  }

  async kill9(): Promise<void> {
    if (!this.running) return;
    this.killedOnPurpose = true;
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (graceful), SIGKILL after 5 s. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.killedOnPurpose = true;
    this.child?.kill('SIGTERM');
    await within(this.exited, 5_000, () => 'no exit').catch(async () => {
      this.child?.kill('SIGKILL');
      await this.exited;
    });
  }

  tail(): string {
    return this.output.slice(-3000);
  }
}

/** A random site-admin token for an API process (the allowed alphabet, 40 characters). */
export const randomAdminToken = (): string => `admin_${randomAlphanumeric(40)}`;
