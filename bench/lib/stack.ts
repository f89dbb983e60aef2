import { Redis } from 'ioredis';
import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { request } from 'undici';
import { CpuMeter, processTicks } from './cpu.ts';
import {
  ADMIN_DATABASE_URL,
  ADMIN_TOKEN,
  benchVariables,
  DATABASE_NAME,
  DATABASE_URL,
  HMAC_KEY,
  log,
  newQueuePrefix,
  QUEUE_PREFIX_ROOT,
  REDIS_URL,
  ROOT,
  serviceEnv,
  sleep,
} from './env.ts';
import { listensOn, readyMessage, spawnNode, stopAll, whileAlive, type Managed } from './procs.ts';
import { GUARDED_DDL, GUARDED_TABLES } from '../lean/guarded-schema.ts';
import { LEAN_DDL, LEAN_TABLES } from '../lean/schema.ts';
import { freePort } from '../../test/support/processes.ts';
import { PROJECT_TABLES, type RunTables } from './run-tables.ts';

export const MEDIA_TYPE = 'application/vnd.api+json';

/** The process's connections carry its name, so PostgreSQL's CPU can be told apart by client (pg_stat_activity). */
function connectingAs(env: Record<string, string>, name: string): Record<string, string> {
  const url = new URL(env['DATABASE_URL'] ?? DATABASE_URL);
  url.searchParams.set('application_name', `bench-${name}`);
  return { ...env, DATABASE_URL: url.toString() };
}

/** A fresh benchmark database: dropped, re-created and migrated with the project's own CLI. */
export async function freshDatabase(): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${admin.escapeIdentifier(DATABASE_NAME)} with (force)`);
  } finally {
    await admin.end();
  }
  const migrate = spawnSync(process.execPath, ['services/api/src/cli.ts', 'migrate'], {
    cwd: ROOT,
    env: {
      PATH: process.env['PATH'] ?? '',
      DATABASE_URL,
      SECRET_KEY: serviceEnv({ port: 0, queuePrefix: 'x' })['SECRET_KEY'],
      LOG_LEVEL: 'warn',
    },
    encoding: 'utf8',
  });
  if (migrate.status !== 0) throw new Error(`migrate failed: ${migrate.stdout}${migrate.stderr}`);
}

/** Deletes every key of the benchmark's queue prefixes (this run's or, with `all`, any left over). */
export async function deleteQueueKeys(prefix: string | undefined): Promise<number> {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
  let deleted = 0;
  try {
    const pattern = prefix ? `${prefix}:*` : `${QUEUE_PREFIX_ROOT}-*`;
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) deleted += await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/** A Redis of the benchmark's own (a node or a cluster it started) instead of the machine's. */
export interface BenchRedis {
  /** The variables that point the service at it. */
  env: Record<string, string>;
  /** A cluster: the queue prefix gets a {hash tag}. */
  cluster: boolean;
  pids(): Promise<number[]>;
  /** Commands processed so far, over every node. */
  commands(): Promise<number>;
}

export interface StackOptions {
  /** A Redis of the benchmark's own; default: the machine's, at BENCH_REDIS_URL. */
  redis?: BenchRedis;
  workers: number;
  profile?: boolean;
  /** Start no worker and no task server (read benchmarks against seeded data). */
  apiOnly?: boolean;
  /** API processes sharing the port (REUSE_PORT); 1 by default. */
  apis?: number;
  /** Start only the task server and the component client (bench/components.ts) instead of the service. */
  componentsOnly?: boolean;
  /**
   * Start the lean reference (bench/lean) with this many tasks per stage instead of the service; `guarded`:
   * the guarded lean reference (bench/lean/guarded-*.ts), which keeps the service's guarantees.
   */
  lean?: { tasks: number; guarded?: boolean };
  extraEnv?: Record<string, string>;
}

export interface ApiResponse {
  status: number;
  body: { data?: { id: string; attributes?: Record<string, unknown> } & Record<string, unknown> } & Record<string, unknown>;
}

/**
 * Everything of one benchmark configuration on this machine: the lean task server, the API
 * (`--role api`), worker processes, the load generator, plus a harness connection to PostgreSQL
 * and Redis. `stop()` ends the processes it started (by pid) and deletes its queue's keys.
 */
export class Stack {
  readonly processes: Managed[] = [];
  readonly queuePrefix: string;
  apiPort = 0;
  baseUrl = '';
  taskServerUrl = '';
  taskServer: Managed | undefined;
  api: Managed | undefined;
  loadgen!: Managed;
  readonly workers: Managed[] = [];
  db!: pg.Client;
  redis: Redis | undefined;
  /** Whether this stack runs the lean reference (bench/lean) instead of the service. */
  readonly lean: boolean;
  /** Where the runs of what this stack started are (the project's tables or the lean reference's). */
  readonly tables: RunTables;
  private postmasterPid = 0;
  /** The backend of `db`, the harness's own connection (progress polls, seeding): not the system's CPU. */
  private harnessBackendPid = 0;
  private redisPids: number[] = [];
  private readonly options: StackOptions;

  private constructor(options: StackOptions) {
    this.options = options;
    this.queuePrefix = options.redis?.cluster ? `{${newQueuePrefix()}}` : newQueuePrefix();
    this.lean = options.lean !== undefined;
    this.tables = !this.lean ? PROJECT_TABLES : options.lean?.guarded ? GUARDED_TABLES : LEAN_TABLES;
  }

  static async start(options: StackOptions): Promise<Stack> {
    const stack = new Stack(options);
    try {
      await stack.boot();
    } catch (error) {
      await stack.stop();
      throw error;
    }
    return stack;
  }

  private async boot(): Promise<void> {
    this.db = new pg.Client({ connectionString: DATABASE_URL, application_name: 'bench-harness' });
    await this.db.connect();
    const { rows } = await this.db.query<{ pid: number }>('select pg_backend_pid() as pid');
    const backend = rows[0]?.pid ?? 0;
    this.harnessBackendPid = backend;
    const stat = (await import('node:fs')).readFileSync(`/proc/${backend}/stat`, 'utf8');
    this.postmasterPid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (this.options.redis) {
      this.redisPids = await this.options.redis.pids();
    } else {
      this.redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
      const pid = Number(/process_id:(\d+)/.exec(await this.redis.info('server'))?.[1]);
      this.redisPids = pid ? [pid] : [];
    }

    this.apiPort = await freePort();
    this.baseUrl = `http://127.0.0.1:${this.apiPort}`;
    const env = serviceEnv({
      port: this.apiPort,
      queuePrefix: this.queuePrefix,
      extra: { ...this.options.redis?.env, ...this.options.extraEnv },
    });
    const profile = this.options.profile ?? false;

    if (!this.options.apiOnly) {
      this.taskServer = this.add(
        spawnNode({
          name: 'task-server',
          role: 'task-server',
          script: 'bench/task-server.ts',
          env: { PATH: env['PATH'] ?? '', TASK_HMAC_KEY: HMAC_KEY },
          ipc: true,
          profile,
        }),
      );
      const { port } = await readyMessage<{ ready: true; port: number }>(this.taskServer);
      this.taskServerUrl = `http://127.0.0.1:${port}/`;
    }
    if (this.options.lean) {
      await this.bootLean(env, this.options.lean, profile);
      return;
    }
    if (this.options.componentsOnly) {
      this.loadgen = this.add(
        // BENCH_DATABASE and BENCH_REDIS_URL too: it connects to the benchmark's database and Redis itself.
        spawnNode({
          name: 'components',
          role: 'loadgen',
          script: 'bench/components.ts',
          env: { PATH: env['PATH'] ?? '', ...benchVariables() },
          ipc: true,
        }),
      );
      await readyMessage(this.loadgen);
      return;
    }
    const apis = this.options.apis ?? 1;
    const apiEnv = apis > 1 ? { ...env, REUSE_PORT: 'true' } : env;
    const apiNamed = (name: string): Managed =>
      this.add(
        spawnNode({
          name,
          role: 'api',
          script: 'services/api/src/main.ts',
          args: ['--role', 'api'],
          env: connectingAs(apiEnv, name),
          profile,
        }),
      );
    this.api = apiNamed('api');
    await whileAlive(this.api, this.waitForApi());
    for (let index = 2; index <= apis; index += 1) {
      const another = apiNamed(`api-${index}`);
      await whileAlive(another, this.waitForListening(another));
    }
    for (let index = 0; index < (this.options.apiOnly ? 0 : this.options.workers); index += 1) {
      const worker = this.add(
        spawnNode({
          name: `worker-${index + 1}`,
          role: 'worker',
          script: 'services/worker/src/main.ts',
          env: connectingAs(env, `worker-${index + 1}`),
          profile,
        }),
      );
      this.workers.push(worker);
    }
    if (this.workers.length > 0) await whileAlive(this.workers[0] as Managed, this.waitForWorkers(this.workers.length));
    await this.startLoadgen(env);
  }

  /** The lean reference's API and worker(s), on the same database (schema `lean`, or `lean_guarded`), Redis and task server. */
  private async bootLean(env: Record<string, string>, lean: { tasks: number; guarded?: boolean }, profile: boolean): Promise<void> {
    const { tasks, guarded = false } = lean;
    await this.db.query(guarded ? GUARDED_DDL : LEAN_DDL);
    const common = { PATH: env['PATH'] ?? '', REDIS_URL, QUEUE_PREFIX: this.queuePrefix };
    this.api = this.add(
      spawnNode({
        name: 'api',
        role: 'api',
        script: guarded ? 'bench/lean/guarded-api.ts' : 'bench/lean/api.ts',
        env: connectingAs({ ...common, DATABASE_URL, PORT: String(this.apiPort), ...(guarded ? { LEAN_HMAC_KEY: HMAC_KEY } : {}) }, 'api'),
        profile,
      }),
    );
    await whileAlive(this.api, this.waitForApi());
    for (let index = 0; index < this.options.workers; index += 1) {
      const name = `worker-${index + 1}`;
      const worker = this.add(
        spawnNode({
          name,
          role: 'worker',
          script: guarded ? 'bench/lean/guarded-worker.ts' : 'bench/lean/worker.ts',
          env: connectingAs(
            {
              ...common,
              DATABASE_URL,
              LEAN_TASKS: String(tasks),
              LEAN_TASK_URL: this.taskServerUrl,
              LEAN_HMAC_KEY: HMAC_KEY,
              LEAN_API_URL: this.baseUrl,
            },
            name,
          ),
          ipc: true,
          profile,
        }),
      );
      this.workers.push(worker);
      await readyMessage(worker);
    }
    await this.startLoadgen(env);
  }

  private async startLoadgen(env: Record<string, string>): Promise<void> {
    this.loadgen = this.add(
      spawnNode({ name: 'loadgen', role: 'loadgen', script: 'bench/loadgen.ts', env: { PATH: env['PATH'] ?? '' }, ipc: true }),
    );
    await readyMessage(this.loadgen);
  }

  private add(managed: Managed): Managed {
    this.processes.push(managed);
    return managed;
  }

  private async waitForApi(): Promise<void> {
    const deadline = Date.now() + 60_000;
    let last = 'no answer';
    while (Date.now() < deadline) {
      try {
        const response = await request(`${this.baseUrl}/readyz`);
        last = `${response.statusCode} ${await response.body.text()}`;
        if (response.statusCode === 200) return;
      } catch (error) {
        last = String(error); // not listening yet
      }
      await sleep(100);
    }
    throw new Error(`the API did not become ready within 60 s (/readyz: ${last}):\n${this.api?.output.slice(-20).join('\n') ?? ''}`);
  }

  /** Another API process on the shared port is up once it listens (readiness could be answered by any of them). */
  private async waitForListening(api: Managed): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (listensOn(api.pid, this.apiPort)) return;
      await sleep(100);
    }
    throw new Error(`${api.name} did not listen on port ${this.apiPort} within 60 s:\n${api.output.slice(-20).join('\n')}`);
  }

  /** A worker is up once its outbox relay LISTENs (it starts after the BullMQ worker). */
  private async waitForWorkers(count: number): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const { rows } = await this.db.query<{ n: string }>(
        `select count(*) as n from pg_stat_activity where datname = $1 and query ilike 'listen %'`,
        [DATABASE_NAME],
      );
      if (Number(rows[0]?.n) >= count) return;
      await sleep(100);
    }
    throw new Error('the workers did not start within 60 s');
  }

  meter(): CpuMeter {
    return new CpuMeter({
      processes: () =>
        this.processes.filter((managed) => managed.child.exitCode === null).map((managed) => ({ pid: managed.pid, role: managed.role })),
      postmasterPid: this.postmasterPid,
      harnessBackendPid: this.harnessBackendPid,
      databaseName: DATABASE_NAME,
      redisPids: this.redisPids,
    });
  }

  /** CPU ticks of the started processes now (for quick checks). */
  ticks(): Record<string, number | undefined> {
    return Object.fromEntries(this.processes.map((managed) => [managed.name, processTicks(managed.pid)]));
  }

  async redisCommands(): Promise<number> {
    if (this.options.redis) return this.options.redis.commands();
    if (!this.redis) return 0;
    const info = await this.redis.info('stats');
    return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
  }

  async call(method: string, path: string, token: string, body?: unknown): Promise<ApiResponse> {
    const response = await request(`${this.baseUrl}/api/v2${path}`, {
      method: method as 'GET',
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': MEDIA_TYPE }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.body.text();
    return { status: response.statusCode, body: text ? (JSON.parse(text) as ApiResponse['body']) : {} };
  }

  async expect(method: string, path: string, token: string, body: unknown, status: number): Promise<ApiResponse> {
    const response = await this.call(method, path, token, body);
    if (response.status !== status) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(response.body).slice(0, 500)}`);
    return response;
  }

  async stop(): Promise<void> {
    if (this.loadgen) await this.loadgen.call({ cmd: 'close' }, 5000).catch(() => undefined);
    await stopAll(this.processes);
    await this.db?.end().catch(() => undefined);
    this.redis?.disconnect();
    // A private Redis goes with its keys.
    const deleted = this.options.redis ? 0 : await deleteQueueKeys(this.queuePrefix).catch(() => 0);
    if (deleted > 0) log(`deleted ${deleted} Redis keys of ${this.queuePrefix}`);
  }
}

export { ADMIN_TOKEN };
