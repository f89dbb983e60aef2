import type { MikroORM } from '@mikro-orm/postgresql';
import { type Config } from '@runtasks/shared/config';
import { type Logger } from '@runtasks/shared/logger';
import { nativePool, pendingMigrations } from '@runtasks/shared/db';
import { JOB_OPTIONS, JOBS, PRINCIPALS_CHANNEL, QUEUES, runCreatedJobId, type RunCreatedJob } from '@runtasks/shared/queue';
import { type SecretBox } from '@runtasks/shared/security';
import { Metrics } from '@runtasks/shared/ops';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { FailedAuthLimit } from '../auth/failed-auth-limit.ts';
import { PrincipalCache } from '../auth/principal-cache.ts';
import type { ApiOps } from '../context.ts';
import { createDashboard } from './dashboard.ts';
import { createRateLimiter } from './rate-limit.ts';

export interface ApiOpsHandle {
  ops: ApiOps;
  startDraining(): void;
  close(): Promise<void>;
}

/** How long a run.created job published at once may wait for Redis before it is left to the relay. */
const PUBLISH_TIMEOUT_MS = 2_000;
/**
 * How long a rate-limit or readiness command may wait for Redis. A Redis whose packets are dropped
 * keeps its connection "ready", and without this every limited request waited for it (minutes, until
 * TCP gave up); past it the limiter's in-memory insurance answers and readiness reports Redis failing.
 */
const REDIS_COMMAND_TIMEOUT_MS = 1_000;

/**
 * What the API process needs for operations: Redis connections (rate limits and readiness; the
 * dashboard's view of the queues; run.created jobs published at once), metrics, readiness checks, and
 * the principal cache with its PostgreSQL LISTEN connection. Redis being down or unreachable never
 * holds a request path for long: commands fail fast (no offline queue, and a command timeout for a
 * Redis that does not answer) and readiness reports it.
 */
export function createApiOps(options: {
  config: Config;
  orm: MikroORM;
  secrets: SecretBox;
  logger: Logger;
  metrics?: Metrics;
}): ApiOpsHandle {
  const { config, orm, secrets, logger } = options;
  const redis = new Redis(config.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: 3000,
  });
  redis.on('error', (error) => logger.warn({ err: error }, 'api redis connection error'));
  const queueRedis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
  queueRedis.on('error', () => undefined);
  const queue = new Queue(QUEUES.runs, { connection: queueRedis, prefix: config.queuePrefix });
  queue.on('error', (error) => logger.warn({ err: error }, 'dashboard queue error'));
  const metrics = options.metrics ?? new Metrics();
  metrics.watchQueue(queue);

  const publisher = runCreatedPublisher(config, logger);
  const principalCache = principalCacheFor(config, orm, logger);
  // Not awaited: until it listens and hears its heartbeat, every request looks its token up.
  void principalCache?.start();
  const authFailures = config.authFailuresPerMinute > 0 ? new FailedAuthLimit({ limit: config.authFailuresPerMinute }) : undefined;

  let draining = false;
  // Pending migrations only ever go away while running, so the check stops querying once they have.
  let migrated = false;
  const ops: ApiOps = {
    metrics,
    isDraining: () => draining,
    rateLimiter: config.rateLimitPerSecond > 0 ? createRateLimiter(redis, config.queuePrefix, config.rateLimitPerSecond) : undefined,
    dashboard: createDashboard({ queues: [queue], readOnly: config.dashboardReadOnly, orm, secrets, principalCache, authFailures }),
    principalCache,
    authFailures,
    publishRunCreated: publisher.publish,
    readinessChecks: {
      redis: async () => {
        if ((await redis.ping()) !== 'PONG') throw new Error('unexpected PING answer');
      },
      migrations: async () => {
        if (migrated) return;
        const pending = await pendingMigrations(orm);
        if (pending.length > 0) throw new Error(`pending: ${pending.join(', ')}`);
        migrated = true;
      },
    },
  };
  return {
    ops,
    startDraining: () => {
      draining = true;
    },
    async close() {
      await principalCache?.stop();
      await queue.close().catch(() => undefined);
      await publisher.close();
      redis.disconnect();
      queueRedis.disconnect();
    },
  };
}

/**
 * A run's first job, published as soon as the run has committed rather than when the outbox relay
 * next polls (the event has no NOTIFY). Never awaited, on a connection of its own that fails fast: only
 * while it is ready, no offline queue, and a command Redis does not answer (a network that drops
 * packets) given up after a while, so an outage neither holds a request nor piles commands up, and the
 * relay publishes those runs' events once Redis is back. The same name, data, id and options as the
 * relay's publication of the event, so that whichever comes second is a no-op.
 */
function runCreatedPublisher(config: Config, logger: Logger): { publish: (job: RunCreatedJob) => void; close: () => Promise<void> } {
  const publishRedis = new Redis(config.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: PUBLISH_TIMEOUT_MS,
    connectTimeout: 3000,
  });
  publishRedis.on('error', () => undefined);
  const publishQueue = new Queue(QUEUES.runs, { connection: publishRedis, prefix: config.queuePrefix });
  publishQueue.on('error', () => undefined);
  const publishRunCreated = (job: RunCreatedJob): void => {
    if (publishRedis.status !== 'ready') return;
    publishQueue.add(JOBS.runCreated, job, { jobId: runCreatedJobId(job.runId), ...JOB_OPTIONS }).catch((error: unknown) => {
      logger.debug({ err: error, runId: job.runId }, 'run.created not published at once; the outbox relay publishes it');
    });
  };
  return {
    publish: publishRunCreated,
    close: async () => {
      await publishQueue.close().catch(() => undefined);
      publishRedis.disconnect();
    },
  };
}

/** The principal cache with its LISTEN connection, when AUTH_CACHE_TTL_MS enables it. */
function principalCacheFor(config: Config, orm: MikroORM, logger: Logger): PrincipalCache | undefined {
  return config.authCacheTtlMs > 0
    ? new PrincipalCache({
        databaseUrl: config.databaseUrl,
        ttlMs: config.authCacheTtlMs,
        logger,
        notify: async (payload) => {
          await (await nativePool(orm.em)).query('select pg_notify($1, $2)', [PRINCIPALS_CHANNEL, payload]);
        },
      })
    : undefined;
}
