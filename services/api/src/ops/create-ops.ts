import type { MikroORM } from '@mikro-orm/postgresql';
import { type Config } from '@runtasks/shared/config';
import { type Logger } from '@runtasks/shared/logger';
import { nativePool, pendingMigrations } from '@runtasks/shared/db';
import { IN_FLIGHT_RESULTS } from '@runtasks/shared/engine';
import {
  JOB_OPTIONS,
  JOBS,
  PRINCIPALS_CHANNEL,
  QUEUES,
  disconnectAll,
  RedisConnections,
  runCreatedJobId,
  type RunCreatedJob,
} from '@runtasks/shared/queue';
import { type SecretBox } from '@runtasks/shared/security';
import { Metrics } from '@runtasks/shared/ops';
import { storageReadinessCheck, storageUsage } from '@runtasks/shared/storage';
import { Queue } from 'bullmq';
import { FailedAuthLimit } from '../auth/failed-auth-limit.ts';
import { PrincipalCache } from '../auth/principal-cache.ts';
import type { ActiveTokenRow } from '../auth/active-tokens.ts';
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
 * What the API process needs for operations: Redis connections (rate limits and readiness on the
 * process's fail-fast connection, whose commands wait at most a second: a Redis whose packets are
 * dropped keeps its connection "ready", and without the timeout every limited request waited for it
 * until TCP gave up; the dashboard's view of the queues; run.created jobs published at once), metrics,
 * readiness checks, and the principal cache with its PostgreSQL LISTEN connection. Redis being down or
 * unreachable never holds a request path for long, and readiness reports it.
 */
export function createApiOps(options: {
  config: Config;
  orm: MikroORM;
  secrets: SecretBox;
  logger: Logger;
  metrics?: Metrics;
  /** The process's Redis connections (shared with the worker in one process); made from the configuration when not given. */
  redis?: RedisConnections;
}): ApiOpsHandle {
  const { config, orm, secrets, logger } = options;
  const redis = options.redis ?? new RedisConnections(config, logger);
  const queue = new Queue(QUEUES.runs, { connection: redis.open('durable'), prefix: config.queuePrefix });
  queue.on('error', (error) => redis.availability.report(error, 'dashboard queue error'));
  const metrics = options.metrics ?? new Metrics();
  metrics.watchQueue(queue);
  metrics.watchStorage(async () => storageUsage(await nativePool(orm.em)));

  const publisher = runCreatedPublisher(config, logger, redis);
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
    rateLimiter:
      config.rateLimitPerSecond > 0 ? createRateLimiter(redis.commands, config.queuePrefix, config.rateLimitPerSecond) : undefined,
    dashboard: createDashboard({ queues: [queue], readOnly: config.dashboardReadOnly, orm, secrets, principalCache, authFailures }),
    principalCache,
    authFailures,
    publishRunCreated: publisher.publish,
    readinessChecks: {
      ...storageReadinessCheck(config.storage),
      redis: () => redis.check(),
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
      if (!options.redis) await redis.close(3_000);
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
function runCreatedPublisher(
  config: Config,
  logger: Logger,
  redis: RedisConnections,
): { publish: (job: RunCreatedJob) => void; close: () => Promise<void> } {
  const publishRedis = redis.open('fail-fast', { commandTimeoutMs: PUBLISH_TIMEOUT_MS });
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
      await disconnectAll([publishRedis], 3_000);
    },
  };
}

/**
 * The keyed hashes of the active tokens, for the principal cache's set of them ($1: at most): the API
 * tokens, and the access tokens stored for open task results (those planned before tokens were derived;
 * a derived one is checked by its MAC, services/api/src/auth/authenticate.ts), which expire with their
 * result's hard deadline. Open results are those of unfinished runs, reached by the runs' index of them.
 */
const ACTIVE_TOKENS_SQL = `select token_hash, expires_at from api_tokens where revoked_at is null and (expires_at is null or expires_at > now())
  union all
  select tr.callback_token_hash, tr.hard_deadline from ${IN_FLIGHT_RESULTS}
     and tr.callback_token_hash is not null and tr.status in ('pending', 'running') and (tr.hard_deadline is null or tr.hard_deadline > now())
  limit $1`;

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
        loadActiveTokens: async (limit) => (await (await nativePool(orm.em)).query<ActiveTokenRow>(ACTIVE_TOKENS_SQL, [limit])).rows,
      })
    : undefined;
}
