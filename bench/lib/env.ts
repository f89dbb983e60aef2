import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

/**
 * Where the benchmark runs: its own database and queue prefixes on the local PostgreSQL and Redis
 * (shared with other people's test runs), and the environment every process it starts gets.
 */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const POSTGRES_URL = (process.env['BENCH_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432').replace(/\/+$/, '');
export const DATABASE_NAME = process.env['BENCH_DATABASE'] ?? 'runtasks_bench';
export const DATABASE_URL = `${POSTGRES_URL}/${DATABASE_NAME}`;
export const ADMIN_DATABASE_URL = `${POSTGRES_URL}/postgres`;
export const REDIS_URL = process.env['BENCH_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0';
export const SECRET_KEY = 'bench-secret-key-0123456789abcdefghijklmnopqrstuvwxyz';
export const ADMIN_TOKEN = 'bench_admin_token_0123456789abcdefghij';
/** The HMAC key of every benchmark task: the task server verifies each request's signature with it. */
export const HMAC_KEY = 'bench-hmac-key-0123456789';
export const RESULTS_DIR = `${ROOT}bench/results`;
export const TMP_DIR = `${RESULTS_DIR}/tmp`;

/** Every queue prefix the benchmark makes starts with this, so leftovers are easy to find and delete. */
export const QUEUE_PREFIX_ROOT = 'bench';

export const newQueuePrefix = (): string => `${QUEUE_PREFIX_ROOT}-${randomBytes(4).toString('hex')}`;

export interface Options {
  quick: boolean;
  /** Start the Node processes with --cpu-prof and count their SQL statements (bench/lib/count-queries.ts). */
  profile: boolean;
  /** H1 on a private Redis node and a private Redis Cluster, side by side, instead of the machine's Redis. */
  redisCluster: boolean;
  /** H1 with this many enabled generic notification configurations per workspace, beside the same with none (0: not measured). */
  notifications: number;
}

export function parseOptions(argv: readonly string[] = process.argv.slice(2)): Options {
  const notifications = argv.find((arg) => arg.startsWith('--notifications='))?.slice('--notifications='.length);
  const count = notifications === undefined ? 0 : Number(notifications);
  if (!Number.isInteger(count) || count < 0 || count > 20) {
    process.stderr.write(`--notifications must be a whole number from 0 to 20 (at most 20 per workspace), not "${notifications ?? ''}"\n`);
    process.exit(2);
  }
  return {
    quick: argv.includes('--quick'),
    profile: argv.includes('--profile'),
    redisCluster: argv.includes('--redis-cluster'),
    notifications: count,
  };
}

/** The environment of the API and worker processes, as the tests start them; rate limiting off. */
export function serviceEnv(options: { port: number; queuePrefix: string; extra?: Record<string, string> }): Record<string, string> {
  return {
    PATH: process.env['PATH'] ?? '',
    HOME: process.env['HOME'] ?? '/tmp',
    NODE_ENV: 'production',
    DATABASE_URL,
    REDIS_URL,
    QUEUE_PREFIX: options.queuePrefix,
    SECRET_KEY,
    ADMIN_TOKEN,
    HOST: '127.0.0.1',
    PORT: String(options.port),
    PUBLIC_BASE_URL: `http://127.0.0.1:${options.port}`,
    TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
    RATE_LIMIT_PER_SECOND: '0',
    LOG_LEVEL: 'warn',
    WORKER_HEALTH_PORT: '0',
    SHUTDOWN_DRAIN_DELAY_MS: '0',
    ...options.extra,
  };
}

/** The BENCH_* variables this run was given (its database, Redis), for the harness's own children that read them. */
export const benchVariables = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).filter((entry): entry is [string, string] => entry[0].startsWith('BENCH_') && entry[1] !== undefined),
  );

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Wall-clock time in milliseconds with sub-millisecond resolution, comparable across processes. */
export const epochMs = (): number => performance.timeOrigin + performance.now();

export function log(line: string): void {
  process.stdout.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}
