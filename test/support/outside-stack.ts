import { loadConfig, type Config } from '@runtasks/shared/config';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { connectRedis, disconnectAll, QUEUES } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import request from 'supertest';
import { ApiProcess, onCleanup, randomAdminToken, workerEnv, WorkerFleet } from './cluster.ts';
import { startHarness, type Harness } from './harness.ts';

/**
 * The service as an operator runs it, pointed at a Redis of the test's choosing (a sentinel set, a
 * cluster): an API process (`main.ts --role api`) and worker processes started from the sources, on a
 * database cloned for the test. Everything the test does to the service goes over HTTP to the API
 * process; `db` is the harness whose database it is (for the invariants at the end). Stopped by the
 * cleanups of test/support/cluster.ts.
 */
export interface OutsideStack {
  /** The harness of the database (its own API in-process is not used). */
  db: Harness;
  /** A harness-shaped client of the API process, for the fixtures (`api(outside, …)`). */
  outside: Harness;
  api: ApiProcess;
  fleet: WorkerFleet;
  /** The configuration the processes read (their Redis among it). */
  config: Config;
  /** The environment every process of the stack gets. */
  env: Record<string, string>;
  /** A queue on the stack's Redis, for counts (failed jobs); closed by the cleanups. */
  queue: Queue;
}

export interface OutsideStackOptions {
  /** The variables that point the service at its Redis (a topology's `env()`). */
  redisEnv: Record<string, string>;
  /** The queue prefix; a cluster needs a {hash-tag}. */
  queuePrefix?: string;
  workers?: number;
  /** Variables of every process besides (timeouts, the rate limit). */
  extraEnv?: Record<string, string>;
  /** Variables of the worker processes only. */
  workerExtraEnv?: Record<string, string>;
}

export async function startOutsideStack(options: OutsideStackOptions): Promise<OutsideStack> {
  const queuePrefix = options.queuePrefix ?? `{rt-${randomAlphanumeric(8)}}`;
  const env: Record<string, string> = { ...options.redisEnv, QUEUE_PREFIX: queuePrefix, ...options.extraEnv };
  const db = await startHarness({ env });
  onCleanup(() => db.close(), 'harness');
  const adminToken = randomAdminToken();
  const api = await ApiProcess.create({
    databaseUrl: db.config.databaseUrl,
    redisUrl: env['REDIS_URL'] ?? db.config.redisUrl,
    queuePrefix,
    adminToken,
    extraEnv: env,
  });
  await api.start();
  const fleet = new WorkerFleet(workerEnv(db, { ...env, PUBLIC_BASE_URL: api.baseUrl, ...options.workerExtraEnv }));
  await Promise.all(Array.from({ length: options.workers ?? 2 }, () => fleet.start().started));
  const outside = { ...db, http: request(api.baseUrl), adminToken, baseUrl: api.baseUrl } as Harness;
  const config = loadConfig({ ...env, DATABASE_URL: db.config.databaseUrl });
  const client = connectRedis(config, 'durable');
  const queue = new Queue(QUEUES.runs, { connection: client, prefix: queuePrefix });
  queue.on('error', () => undefined);
  onCleanup(async () => {
    await queue.close();
    // A connection given to BullMQ is the giver's to close.
    await disconnectAll([client], 5_000);
  }, 'queue');
  return { db, outside, api, fleet, config, env, queue };
}

/** How many times each process logged `message` since `from` (the length of its messages then). */
export function countMessages(stack: OutsideStack, message: string, from: Map<string, number> = new Map()): Record<string, number> {
  const processes: [string, string[]][] = [
    ['api', stack.api.messages],
    ...stack.fleet.all.map((worker) => [worker.name, worker.messages] as [string, string[]]),
  ];
  return Object.fromEntries(
    processes.map(([name, messages]) => [name, messages.slice(from.get(name) ?? 0).filter((msg) => msg === message).length]),
  );
}

/** Where each process's log stands now, for countMessages. */
export function messageMarks(stack: OutsideStack): Map<string, number> {
  return new Map([
    ['api', stack.api.messages.length],
    ...stack.fleet.all.map((worker) => [worker.name, worker.messages.length] as [string, number]),
  ]);
}
