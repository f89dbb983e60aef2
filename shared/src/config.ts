import { z } from 'zod';

/**
 * The configuration contract (DESIGN §4a). Parsed once at start-up; nothing else reads process.env.
 * Names and meanings are stable because operators and tests rely on them.
 */
const positiveInt = z.coerce.number().int().positive();

export const ConfigSchema = z
  .object({
    NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
    DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).default('postgres://postgres@127.0.0.1:5432/runtasks'),
    // Connections of one process (API or worker) to PostgreSQL; keep the sum over processes under max_connections.
    DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(10),
    // A backstop for the API's and the workers' statements (0: none); migrations and the cascading deletes
    // of a workspace or an organization lift it (those keep it as a lock timeout).
    DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(0).max(86_400_000).default(30_000),
    REDIS_URL: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379/0'),
    HOST: z.string().min(1).default('127.0.0.1'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    // Several API processes on one host share PORT (SO_REUSEPORT: the kernel spreads connections).
    REUSE_PORT: z.stringbool().default(false),
    PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
    ADMIN_TOKEN: z
      .string()
      .regex(/^[A-Za-z0-9_-]{20,256}$/, 'ADMIN_TOKEN must be 20 to 256 letters, digits, - or _')
      .optional(),
    SECRET_KEY: z.string().min(32, 'SECRET_KEY must be at least 32 characters').optional(),
    TASK_DESTINATION_ALLOWLIST: z.string().default(''),
    TASK_PROGRESS_TIMEOUT_SECONDS: positiveInt.default(600),
    TASK_MAX_RUNTIME_SECONDS: positiveInt.default(3600),
    TASK_VERIFICATION_TIMEOUT_SECONDS: positiveInt.default(10),
    TASK_RETRY_DELAYS_SECONDS: z
      .string()
      .regex(/^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$/, 'must be comma-separated seconds, e.g. 5,30,120')
      .default('5,30,120'),
    CONFIGURATION_VERSION_MAX_BYTES: positiveInt.default(50 * 1024 * 1024),
    CONFIGURATION_UPLOAD_URL_TTL_SECONDS: positiveInt.default(3600),
    // The largest plan JSON a pipeline may report for a local run.
    PLAN_JSON_MAX_BYTES: positiveInt.default(50 * 1024 * 1024),
    // How long a local run waits at planning or applying for its pipeline's report before it ends errored.
    LOCAL_EXECUTION_TIMEOUT_SECONDS: positiveInt.default(3600),
    RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(0).default(30),
    // How long an API process may remember a token's principal (0: never). Changes are heard at once
    // (LISTEN/NOTIFY, checked by a heartbeat); this bounds an entry's life besides.
    AUTH_CACHE_TTL_SECONDS: z.coerce.number().min(0).max(3600).default(10),
    DASHBOARD_READ_ONLY: z.stringbool().default(true),
    WORKER_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9100),
    SHUTDOWN_DRAIN_DELAY_MS: z.coerce.number().int().min(0).default(1000),
    SHUTDOWN_TIMEOUT_MS: positiveInt.default(25_000),
    SWEEPER_INTERVAL_SECONDS: z.coerce.number().positive().default(15),
    QUEUE_PREFIX: z.string().min(1).default('runtasks'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    WORKER_CONCURRENCY: positiveInt.default(16),
    OUTBOX_POLL_INTERVAL_MS: positiveInt.default(2000),
  })
  .transform((env) => ({
    nodeEnv: env.NODE_ENV,
    databaseUrl: env.DATABASE_URL,
    databasePoolSize: env.DATABASE_POOL_SIZE,
    databaseStatementTimeoutMs: env.DATABASE_STATEMENT_TIMEOUT_MS,
    redisUrl: env.REDIS_URL,
    host: env.HOST,
    port: env.PORT,
    reusePort: env.REUSE_PORT,
    publicBaseUrl: (env.PUBLIC_BASE_URL ?? `http://localhost:${env.PORT}`).replace(/\/+$/, ''),
    adminToken: env.ADMIN_TOKEN,
    secretKey: env.SECRET_KEY,
    taskDestinationAllowlist: env.TASK_DESTINATION_ALLOWLIST.split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry.length > 0),
    taskProgressTimeoutSeconds: env.TASK_PROGRESS_TIMEOUT_SECONDS,
    taskMaxRuntimeSeconds: env.TASK_MAX_RUNTIME_SECONDS,
    taskVerificationTimeoutSeconds: env.TASK_VERIFICATION_TIMEOUT_SECONDS,
    taskRetryDelaysMs: env.TASK_RETRY_DELAYS_SECONDS.split(',').map((seconds) => Math.round(Number(seconds) * 1000)),
    configurationVersionMaxBytes: env.CONFIGURATION_VERSION_MAX_BYTES,
    configurationUploadUrlTtlSeconds: env.CONFIGURATION_UPLOAD_URL_TTL_SECONDS,
    planJsonMaxBytes: env.PLAN_JSON_MAX_BYTES,
    localExecutionTimeoutSeconds: env.LOCAL_EXECUTION_TIMEOUT_SECONDS,
    rateLimitPerSecond: env.RATE_LIMIT_PER_SECOND,
    authCacheTtlMs: Math.round(env.AUTH_CACHE_TTL_SECONDS * 1000),
    dashboardReadOnly: env.DASHBOARD_READ_ONLY,
    workerHealthPort: env.WORKER_HEALTH_PORT,
    shutdownDrainDelayMs: env.SHUTDOWN_DRAIN_DELAY_MS,
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    sweeperIntervalMs: Math.round(env.SWEEPER_INTERVAL_SECONDS * 1000),
    queuePrefix: env.QUEUE_PREFIX,
    logLevel: env.LOG_LEVEL,
    workerConcurrency: env.WORKER_CONCURRENCY,
    outboxPollIntervalMs: env.OUTBOX_POLL_INTERVAL_MS,
  }));

export type Config = z.output<typeof ConfigSchema>;

export class ConfigError extends Error {}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings are how shells and compose files say "unset".
  const defined = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = ConfigSchema.safeParse(defined);
  if (!parsed.success) throw new ConfigError(`Invalid configuration:\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
