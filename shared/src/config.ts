import { tmpdir } from 'node:os';
import { z } from 'zod';
import { DEFAULT_LOCAL_TIMEOUTS } from './domain/executions.ts';
import { hashTagOf } from './queue/hash-slot.ts';

/**
 * The configuration contract (docs/operations.md, "Configuration"). Parsed once at start-up; nothing else reads process.env.
 * Names and meanings are stable because operators and tests rely on them.
 */
const positiveInt = z.coerce.number().int().positive();

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/runtasks';
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379/0';
/** GitHub Actions' and GitLab.com's issuers of CI identity tokens. */
export const DEFAULT_CI_TOKEN_ISSUERS = ['https://token.actions.githubusercontent.com', 'https://gitlab.com'];

/** A Redis node or sentinel address. */
export interface HostPort {
  host: string;
  port: number;
}

/**
 * Which Redis the service talks to: one node at REDIS_URL, a primary found through sentinels, or a
 * cluster. In the latter two REDIS_URL gives only the scheme (`rediss://`: TLS), the user, the password
 * and (Sentinel) the database of the data nodes.
 */
export type RedisTopology =
  | { mode: 'single' }
  | { mode: 'sentinel'; sentinels: HostPort[]; name: string; sentinelPassword: string | undefined }
  | { mode: 'cluster'; nodes: HostPort[] };

/** `host:port,host:port,…` (IPv6 in brackets); a missing port is `defaultPort`. */
function hostPortList(defaultPort: number) {
  return z
    .string()
    .transform((value, ctx): HostPort[] => {
      const entries = value
        .split(',')
        .map((entry) => entry.trim())
        .filter((entry) => entry.length > 0);
      const parsed: HostPort[] = [];
      for (const entry of entries) {
        const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+))(?::(\d{1,5}))?$/.exec(entry);
        const port = match?.[3] === undefined ? defaultPort : Number(match[3]);
        const host = match?.[1] ?? match?.[2];
        if (!host || port < 1 || port > 65535) {
          ctx.addIssue({ code: 'custom', message: `"${entry}" is not host:port (IPv6 as [::1]:${defaultPort})` });
          return z.NEVER;
        }
        parsed.push({ host, port });
      }
      if (parsed.length === 0) ctx.addIssue({ code: 'custom', message: 'must name at least one host:port' });
      return parsed;
    })
    .optional();
}

export const ConfigSchema = z
  .object({
    NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
    // No default here: whether it was set decides whether `npm start` may embed a PostgreSQL of its own.
    DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
    // Connections of one process (API or worker) to PostgreSQL; keep the sum over processes under max_connections.
    DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(1000).default(10),
    // A backstop for the API's and the workers' statements (0: none); migrations and the cascading deletes
    // of a workspace or an organization lift it (those keep it as a lock timeout).
    DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(0).max(86_400_000).default(30_000),
    REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
    // Sentinel: the sentinels, the name they monitor the primary under, their own password if any.
    REDIS_SENTINELS: hostPortList(26_379),
    REDIS_SENTINEL_NAME: z.string().min(1).optional(),
    REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),
    // Cluster: some of its nodes (the client learns the others from them).
    REDIS_CLUSTER_NODES: hostPortList(6379),
    // A PEM file of the certificate authorities a rediss:// Redis (and its sentinels) is checked against.
    REDIS_TLS_CA: z.string().min(1).optional(),
    // `npm start` on one machine: start a PostgreSQL (and a Redis from PATH) of its own for a URL left
    // unset, when nothing answers at its default address (`auto`) or whatever answers (`always`).
    RUNTASKS_EMBEDDED: z.enum(['auto', 'always', 'never']).default('auto'),
    // Where the development key and the embedded services' data live.
    RUNTASKS_DATA_DIR: z.string().min(1).default('.runtasks'),
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
    // Notifications (docs/notifications.md): where email is sent through, its sender, and the retry schedule of deliveries.
    SMTP_URL: z.string().url('SMTP_URL must be a URL such as smtp://user:password@mail.example.com:587').optional(),
    SMTP_FROM: z.string().min(3).default('runtasks <runtasks@localhost>'),
    NOTIFICATION_RETRY_DELAYS_SECONDS: z
      .string()
      .regex(/^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$/, 'must be comma-separated seconds, e.g. 5,30,120')
      .default('5,30,120,600,1800'),
    CONFIGURATION_VERSION_MAX_BYTES: positiveInt.default(50 * 1024 * 1024),
    CONFIGURATION_UPLOAD_URL_TTL_SECONDS: positiveInt.default(3600),
    // The largest plan JSON a pipeline may report for a local run.
    PLAN_JSON_MAX_BYTES: positiveInt.default(50 * 1024 * 1024),
    // Where archives and reported plans are stored (docs/operations.md, "Storage"): PostgreSQL, or an S3-compatible bucket.
    STORAGE_BACKEND: z.enum(['postgres', 's3']).default('postgres'),
    // STORAGE_BACKEND=s3: the bucket, and where it is (an endpoint for MinIO and other S3-compatible
    // servers; AWS's own for the region otherwise). Credentials come from AWS's usual chain
    // (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity, the instance's role).
    S3_BUCKET: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'S3_BUCKET must be a bucket name (3 to 63 lowercase letters, digits, dots and hyphens)')
      .optional(),
    S3_ENDPOINT: z.url({ protocol: /^https?$/, error: 'S3_ENDPOINT must be a URL such as http://minio.internal:9000' }).optional(),
    S3_REGION: z.string().min(1).default('us-east-1'),
    // Address the bucket in the path (http://host/bucket/key), as MinIO and most S3-compatible servers want.
    S3_FORCE_PATH_STYLE: z.stringbool().default(false),
    // STORAGE_BACKEND=s3: where each upload's part being filled is spooled (a file of at most 5 MiB per
    // upload in progress, removed when it ends); the system's temporary directory where absent.
    STORAGE_SPOOL_DIR: z.string().min(1).optional(),
    // The bytes of archives and plans one organization may keep (0: no quota).
    STORAGE_QUOTA_BYTES: z.coerce
      .number()
      .int()
      .min(0)
      .default(10 * 1024 * 1024 * 1024),
    // Finished runs' archives and plans older than this are removed by the worker (0: kept, as HCP keeps them).
    STORAGE_RETENTION_DAYS: z.coerce.number().min(0).default(0),
    // A request body must arrive at least this fast, measured over each window (a stalled upload is cut at the window's end).
    UPLOAD_MIN_BYTES_PER_SECOND: z.coerce
      .number()
      .int()
      .min(1)
      .default(16 * 1024),
    UPLOAD_RATE_WINDOW_SECONDS: z.coerce.number().positive().max(3600).default(30),
    // How long a local run waits at planning (and at applying) for its pipeline's report before it ends
    // errored (docs/pipelines.md, "A pipeline that disappears"); LOCAL_EXECUTION_TIMEOUT_SECONDS, the
    // earlier single setting, stands for both where they are not set.
    LOCAL_PLAN_TIMEOUT_SECONDS: positiveInt.optional(),
    LOCAL_APPLY_TIMEOUT_SECONDS: positiveInt.optional(),
    LOCAL_EXECUTION_TIMEOUT_SECONDS: positiveInt.optional(),
    RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(0).default(30),
    // Archive and plan JSON downloads under way at once in one API process: per token, and in all (by
    // default half the database pool, so downloads never take the connections other requests need).
    DOWNLOADS_PER_TOKEN: positiveInt.default(4),
    DOWNLOADS_TOTAL: positiveInt.optional(),
    DOWNLOADS_WAIT_SECONDS: z.coerce.number().min(0).max(120).default(30),
    // How long a download waits, between two chunks, for the process's other requests to be handled (0: never).
    DOWNLOADS_YIELD_MS: z.coerce.number().int().min(0).max(1000).default(100),
    // How long an API process may remember a token's principal (0: never). Changes are heard at once
    // (LISTEN/NOTIFY, checked by a heartbeat); this bounds an entry's life besides.
    AUTH_CACHE_TTL_SECONDS: z.coerce.number().min(0).max(3600).default(10),
    DASHBOARD_READ_ONLY: z.stringbool().default(true),
    // The run pages: how long a browser stays signed in (never past its token), and how often an open
    // run page asks for news while the run moves.
    PAGES_SESSION_TTL_SECONDS: z.coerce.number().int().min(60).max(2_592_000).default(28_800),
    PAGES_REFRESH_SECONDS: z.coerce.number().min(1).max(300).default(5),
    // Compress responses of a few KB and more (gzip or br, as the client accepts): off where a proxy in
    // front compresses already.
    HTTP_COMPRESSION: z.stringbool().default(true),
    WORKER_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(9100),
    SHUTDOWN_DRAIN_DELAY_MS: z.coerce.number().int().min(0).default(1000),
    SHUTDOWN_TIMEOUT_MS: positiveInt.default(25_000),
    SWEEPER_INTERVAL_SECONDS: z.coerce.number().positive().default(15),
    // How long the audit trail keeps an event; the worker prunes older ones every hour.
    AUDIT_TRAIL_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(90),
    QUEUE_PREFIX: z.string().min(1).default('runtasks'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    WORKER_CONCURRENCY: positiveInt.default(16),
    // Notification jobs per worker process, on their own queue beside WORKER_CONCURRENCY's (docs/notifications.md).
    NOTIFICATION_CONCURRENCY: positiveInt.default(4),
    OUTBOX_POLL_INTERVAL_MS: positiveInt.default(2000),
    // Failed authentications a client address may have per minute in one API process before it is
    // answered 429 without a lookup (0: no limit).
    AUTH_FAILURES_PER_MINUTE: z.coerce.number().int().min(0).default(20),
    // Whether X-Forwarded-For names the client (its last hop, as the proxy in front of the API adds it).
    TRUST_PROXY: z.stringbool().default(false),
    // How long start-up waits for PostgreSQL and Redis to answer before it exits 1 (0: it does not wait).
    STARTUP_TIMEOUT_SECONDS: z.coerce.number().min(0).max(86_400).default(60),
    // The OpenID Connect issuers whose CI identity tokens workspaces may trust (docs/sso.md), and how
    // long a token exchanged for one lives.
    CI_TOKEN_ISSUERS: z.string().default(DEFAULT_CI_TOKEN_ISSUERS.join(',')),
    CI_TOKEN_TTL_SECONDS: z.coerce.number().int().min(60).max(3600).default(900),
    // Single sign-on to the run pages with OpenID Connect (docs/sso.md): the provider, this service's
    // client there, the scopes asked for, and the claim whose values name teams (unset: no team mapping).
    OIDC_ISSUER: z.url({ protocol: /^https?$/ }).optional(),
    OIDC_CLIENT_ID: z.string().min(1).optional(),
    OIDC_CLIENT_SECRET: z.string().min(1).optional(),
    OIDC_SCOPES: z
      .string()
      .regex(/^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/, 'must be scopes separated by single spaces')
      .default('openid email profile'),
    OIDC_TEAMS_CLAIM: z.string().min(1).max(200).optional(),
    // Whether a person may still sign in to the run pages by pasting an API token.
    RUN_PAGES_TOKEN_SIGN_IN: z.stringbool().default(true),
  })
  .refine(
    (env) =>
      [env.OIDC_ISSUER, env.OIDC_CLIENT_ID, env.OIDC_CLIENT_SECRET].every(
        (value) => (value === undefined) === (env.OIDC_ISSUER === undefined),
      ),
    {
      message: 'OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are set together, or none of them',
      path: ['OIDC_ISSUER'],
    },
  )
  // The code, the client secret and the person's identity cross this connection: plain HTTP only on loopback.
  .refine(
    (env) => env.OIDC_ISSUER === undefined || env.OIDC_ISSUER.startsWith('https:') || isLoopbackName(new URL(env.OIDC_ISSUER).hostname),
    {
      message: 'OIDC_ISSUER must be https:// (http:// only on a loopback name: localhost, *.localhost, 127.0.0.1, [::1])',
      path: ['OIDC_ISSUER'],
    },
  )
  .refine((env) => !(env.NODE_ENV === 'production' && env.RUNTASKS_EMBEDDED === 'always'), {
    message: 'RUNTASKS_EMBEDDED=always is for one machine; with NODE_ENV=production set DATABASE_URL and REDIS_URL',
    path: ['RUNTASKS_EMBEDDED'],
  })
  .refine((env) => env.STORAGE_BACKEND !== 's3' || env.S3_BUCKET !== undefined, {
    message: 'STORAGE_BACKEND=s3 needs S3_BUCKET (and S3_ENDPOINT for a server other than AWS S3)',
    path: ['S3_BUCKET'],
  })
  .superRefine((env, ctx) => {
    for (const problem of redisTopologyProblems(env)) ctx.addIssue({ code: 'custom', ...problem });
  })
  .transform((env) => ({
    nodeEnv: env.NODE_ENV,
    databaseUrl: env.DATABASE_URL ?? DEFAULT_DATABASE_URL,
    databasePoolSize: env.DATABASE_POOL_SIZE,
    downloadsPerToken: env.DOWNLOADS_PER_TOKEN,
    downloadsTotal: env.DOWNLOADS_TOTAL ?? Math.max(1, Math.floor(env.DATABASE_POOL_SIZE / 2)),
    downloadsWaitMs: Math.round(env.DOWNLOADS_WAIT_SECONDS * 1000),
    downloadsYieldMs: env.DOWNLOADS_YIELD_MS,
    databaseStatementTimeoutMs: env.DATABASE_STATEMENT_TIMEOUT_MS,
    redisUrl: env.REDIS_URL ?? DEFAULT_REDIS_URL,
    redisTopology: redisTopologyOf(env),
    redisTlsCaFile: env.REDIS_TLS_CA,
    embedded: {
      // Production always names its services.
      mode: env.NODE_ENV === 'production' ? ('never' as const) : env.RUNTASKS_EMBEDDED,
      databaseUrlSet: env.DATABASE_URL !== undefined,
      // Sentinels or a cluster name a Redis as surely as REDIS_URL does.
      redisUrlSet: env.REDIS_URL !== undefined || env.REDIS_SENTINELS !== undefined || env.REDIS_CLUSTER_NODES !== undefined,
    },
    dataDir: env.RUNTASKS_DATA_DIR,
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
    smtpUrl: env.SMTP_URL,
    smtpFrom: env.SMTP_FROM,
    notificationRetryDelaysMs: env.NOTIFICATION_RETRY_DELAYS_SECONDS.split(',').map((seconds) => Math.round(Number(seconds) * 1000)),
    configurationVersionMaxBytes: env.CONFIGURATION_VERSION_MAX_BYTES,
    configurationUploadUrlTtlSeconds: env.CONFIGURATION_UPLOAD_URL_TTL_SECONDS,
    planJsonMaxBytes: env.PLAN_JSON_MAX_BYTES,
    storage: {
      backend: env.STORAGE_BACKEND,
      quotaBytes: env.STORAGE_QUOTA_BYTES,
      retentionMs: Math.round(env.STORAGE_RETENTION_DAYS * 86_400_000),
      s3:
        env.STORAGE_BACKEND === 's3' && env.S3_BUCKET !== undefined
          ? {
              bucket: env.S3_BUCKET,
              endpoint: env.S3_ENDPOINT,
              region: env.S3_REGION,
              forcePathStyle: env.S3_FORCE_PATH_STYLE,
              spoolDir: env.STORAGE_SPOOL_DIR ?? tmpdir(),
            }
          : undefined,
    },
    uploadRate: { minBytesPerSecond: env.UPLOAD_MIN_BYTES_PER_SECOND, windowMs: Math.round(env.UPLOAD_RATE_WINDOW_SECONDS * 1000) },
    localTimeouts: {
      planning: env.LOCAL_PLAN_TIMEOUT_SECONDS ?? env.LOCAL_EXECUTION_TIMEOUT_SECONDS ?? DEFAULT_LOCAL_TIMEOUTS.planning,
      applying: env.LOCAL_APPLY_TIMEOUT_SECONDS ?? env.LOCAL_EXECUTION_TIMEOUT_SECONDS ?? DEFAULT_LOCAL_TIMEOUTS.applying,
    },
    rateLimitPerSecond: env.RATE_LIMIT_PER_SECOND,
    authCacheTtlMs: Math.round(env.AUTH_CACHE_TTL_SECONDS * 1000),
    dashboardReadOnly: env.DASHBOARD_READ_ONLY,
    pagesSessionTtlSeconds: env.PAGES_SESSION_TTL_SECONDS,
    pagesRefreshMs: Math.round(env.PAGES_REFRESH_SECONDS * 1000),
    httpCompression: env.HTTP_COMPRESSION,
    workerHealthPort: env.WORKER_HEALTH_PORT,
    shutdownDrainDelayMs: env.SHUTDOWN_DRAIN_DELAY_MS,
    shutdownTimeoutMs: env.SHUTDOWN_TIMEOUT_MS,
    sweeperIntervalMs: Math.round(env.SWEEPER_INTERVAL_SECONDS * 1000),
    auditTrailRetentionDays: env.AUDIT_TRAIL_RETENTION_DAYS,
    queuePrefix: env.QUEUE_PREFIX,
    logLevel: env.LOG_LEVEL,
    workerConcurrency: env.WORKER_CONCURRENCY,
    notificationConcurrency: env.NOTIFICATION_CONCURRENCY,
    outboxPollIntervalMs: env.OUTBOX_POLL_INTERVAL_MS,
    startupTimeoutMs: Math.round(env.STARTUP_TIMEOUT_SECONDS * 1000),
    authFailuresPerMinute: env.AUTH_FAILURES_PER_MINUTE,
    trustProxy: env.TRUST_PROXY,
    ciTokenIssuers: env.CI_TOKEN_ISSUERS.split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry.length > 0),
    ciTokenTtlSeconds: env.CI_TOKEN_TTL_SECONDS,
    oidc:
      env.OIDC_ISSUER && env.OIDC_CLIENT_ID && env.OIDC_CLIENT_SECRET
        ? {
            // As given: the issuer identifier is compared exactly (a trailing slash counts).
            issuer: env.OIDC_ISSUER,
            clientId: env.OIDC_CLIENT_ID,
            clientSecret: env.OIDC_CLIENT_SECRET,
            scopes: env.OIDC_SCOPES.split(' ').includes('openid') ? env.OIDC_SCOPES : `openid ${env.OIDC_SCOPES}`,
            teamsClaim: env.OIDC_TEAMS_CLAIM ?? null,
          }
        : null,
    pagesTokenSignIn: env.RUN_PAGES_TOKEN_SIGN_IN,
  }));

export type Config = z.output<typeof ConfigSchema>;
/** Where stored objects live and how long, and how much an organization keeps (shared/src/storage). */
export type StorageConfig = Config['storage'];

/** A host name that stays on this machine (browsers keep *.localhost on loopback too): where plain HTTP is allowed for development. */
export function isLoopbackName(hostname: string): boolean {
  return ['localhost', '127.0.0.1', '[::1]'].includes(hostname) || hostname.endsWith('.localhost');
}

interface RedisEnv {
  REDIS_URL?: string | undefined;
  REDIS_SENTINELS?: HostPort[] | undefined;
  REDIS_SENTINEL_NAME?: string | undefined;
  REDIS_SENTINEL_PASSWORD?: string | undefined;
  REDIS_CLUSTER_NODES?: HostPort[] | undefined;
  REDIS_TLS_CA?: string | undefined;
  QUEUE_PREFIX: string;
}

function redisTopologyOf(env: RedisEnv): RedisTopology {
  if (env.REDIS_SENTINELS && env.REDIS_SENTINEL_NAME)
    return {
      mode: 'sentinel',
      sentinels: env.REDIS_SENTINELS,
      name: env.REDIS_SENTINEL_NAME,
      sentinelPassword: env.REDIS_SENTINEL_PASSWORD,
    };
  if (env.REDIS_CLUSTER_NODES) return { mode: 'cluster', nodes: env.REDIS_CLUSTER_NODES };
  return { mode: 'single' };
}

/** Settings of the Redis variables that cannot work together, each a line saying why. */
function redisTopologyProblems(env: RedisEnv): { message: string; path: string[] }[] {
  const problems: { message: string; path: string[] }[] = [];
  if (env.REDIS_SENTINELS && env.REDIS_CLUSTER_NODES)
    problems.push({ message: 'set REDIS_SENTINELS or REDIS_CLUSTER_NODES, not both', path: ['REDIS_CLUSTER_NODES'] });
  if (env.REDIS_SENTINELS && !env.REDIS_SENTINEL_NAME)
    problems.push({
      message: 'REDIS_SENTINELS needs REDIS_SENTINEL_NAME, the name the sentinels monitor the primary under (e.g. mymaster)',
      path: ['REDIS_SENTINEL_NAME'],
    });
  for (const variable of ['REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_PASSWORD'] as const) {
    if (env[variable] !== undefined && !env.REDIS_SENTINELS)
      problems.push({ message: `${variable} is set but REDIS_SENTINELS is not`, path: [variable] });
  }
  if (env.REDIS_CLUSTER_NODES) {
    if (!hashTagOf(env.QUEUE_PREFIX))
      problems.push({
        message: `QUEUE_PREFIX=${env.QUEUE_PREFIX} has no {hash-tag}, which Redis Cluster needs: BullMQ's scripts use several keys of a queue at once and a cluster runs them only when all lie in one slot; set e.g. QUEUE_PREFIX={runtasks}`,
        path: ['QUEUE_PREFIX'],
      });
    const database = env.REDIS_URL ? new URL(env.REDIS_URL).pathname.replace(/^\//, '') : '';
    if (database !== '' && database !== '0')
      problems.push({ message: `Redis Cluster has database 0 only; REDIS_URL names database ${database}`, path: ['REDIS_URL'] });
  }
  if (env.REDIS_TLS_CA && !env.REDIS_URL?.startsWith('rediss:'))
    problems.push({ message: 'REDIS_TLS_CA applies to TLS connections: give REDIS_URL the rediss:// scheme', path: ['REDIS_TLS_CA'] });
  return problems;
}

export class ConfigError extends Error {}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings are how shells and compose files say "unset".
  const defined = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = ConfigSchema.safeParse(defined);
  if (!parsed.success) throw new ConfigError(`Invalid configuration:\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
