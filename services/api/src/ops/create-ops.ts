import type { MikroORM } from '@mikro-orm/postgresql';
import {
  Metrics,
  nativePool,
  pendingMigrations,
  PRINCIPALS_CHANNEL,
  QUEUES,
  type Config,
  type Logger,
  type SecretBox,
} from '@runtasks/shared';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { PrincipalCache } from '../auth/principal-cache.ts';
import type { ApiOps } from '../context.ts';
import { createDashboard } from './dashboard.ts';
import { createRateLimiter } from './rate-limit.ts';

export interface ApiOpsHandle {
  ops: ApiOps;
  startDraining(): void;
  close(): Promise<void>;
}

/**
 * What the API process needs for operations: one Redis connection (rate limits, readiness, the
 * dashboard's view of the queues), metrics, readiness checks, and the principal cache with its
 * PostgreSQL LISTEN connection. Redis being down never blocks a request path: commands fail fast (no
 * offline queue) and readiness reports it.
 */
export function createApiOps(options: {
  config: Config;
  orm: MikroORM;
  secrets: SecretBox;
  logger: Logger;
  metrics?: Metrics;
}): ApiOpsHandle {
  const { config, orm, secrets, logger } = options;
  const redis = new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 3000 });
  redis.on('error', (error) => logger.warn({ err: error }, 'api redis connection error'));
  const queueRedis = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
  queueRedis.on('error', () => undefined);
  const queue = new Queue(QUEUES.runs, { connection: queueRedis, prefix: config.queuePrefix });
  queue.on('error', (error) => logger.warn({ err: error }, 'dashboard queue error'));
  const metrics = options.metrics ?? new Metrics();
  metrics.watchQueue(queue);

  const principalCache =
    config.authCacheTtlMs > 0
      ? new PrincipalCache({
          databaseUrl: config.databaseUrl,
          ttlMs: config.authCacheTtlMs,
          logger,
          notify: async (payload) => {
            await (await nativePool(orm.em)).query('select pg_notify($1, $2)', [PRINCIPALS_CHANNEL, payload]);
          },
        })
      : undefined;
  // Not awaited: until it listens and hears its heartbeat, every request looks its token up.
  void principalCache?.start();

  let draining = false;
  // Pending migrations only ever go away while running, so the check stops querying once they have.
  let migrated = false;
  const ops: ApiOps = {
    metrics,
    isDraining: () => draining,
    rateLimiter: config.rateLimitPerSecond > 0 ? createRateLimiter(redis, config.queuePrefix, config.rateLimitPerSecond) : undefined,
    dashboard: createDashboard({ queues: [queue], readOnly: config.dashboardReadOnly, orm, secrets }),
    principalCache,
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
      redis.disconnect();
      queueRedis.disconnect();
    },
  };
}
