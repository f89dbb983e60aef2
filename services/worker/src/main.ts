import { createLogger } from '@runtasks/shared/logger';
import { createSecretBox, resolveSecretKey } from '@runtasks/shared/security';
import { loadConfig } from '@runtasks/shared/config';
import {
  openOrm,
  pendingMigrations,
  postgresUnreachableMessage,
  redisUnreachableMessage,
  waitForBackingServices,
} from '@runtasks/shared/db';
import { pingRedis, RedisConnections } from '@runtasks/shared/queue';
import { onShutdownSignals, startHealthServer } from '@runtasks/shared/ops';
import { storageReadinessCheck } from '@runtasks/shared/storage';
import type { Server } from 'node:http';
import { startWorker, type RunningWorker } from './worker.ts';

/** A worker process on its own; run as many as the load needs (`npm run start:worker`). */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'runtasks-worker');
  // Past STARTUP_TIMEOUT_SECONDS, its one-line message is what the process prints.
  await waitForBackingServices({ config, logger });
  let orm;
  try {
    orm = await openOrm(config.databaseUrl, config.databasePoolSize, { statementTimeoutMs: config.databaseStatementTimeoutMs });
    await orm.em.getConnection().execute('select 1');
  } catch (error) {
    throw new Error(postgresUnreachableMessage(error, config.databaseUrl) ?? String(error), { cause: error });
  }
  try {
    await pingRedis(config);
  } catch (error) {
    throw new Error(redisUnreachableMessage(error, config), { cause: error });
  }
  const pending = await pendingMigrations(orm);
  if (pending.length > 0) throw new Error(`Migrations are pending (${pending.join(', ')}): run \`npm run migrate\` first.`);
  // The same SECRET_KEY as the API: it decrypts HMAC keys and keys the callback-token hashes.
  const secrets = createSecretBox(resolveSecretKey(config).key);
  let worker: RunningWorker | undefined;
  let health: Server | undefined;
  let draining = false;
  // Every Redis connection of the process: the worker's, and the quick one readiness asks.
  const redis = new RedisConnections(config, logger);
  let started: Promise<void> = Promise.resolve();
  // Handled from before the worker takes its first job: a signal that comes while it starts waits for
  // start-up to end and then stops it, rather than killing the process with jobs active.
  onShutdownSignals(logger, config.shutdownTimeoutMs, async () => {
    await started.catch(() => undefined);
    draining = true;
    // Active jobs finish; nothing new is taken. A job killed anyway comes back as stalled elsewhere.
    await worker?.close();
    await new Promise<void>((resolve) => (health ? health.close(() => resolve()) : resolve()));
    await redis.close(3_000);
    await orm.close();
  });
  started = (async () => {
    const running = await startWorker({ config, orm, logger, secrets, redis });
    worker = running;
    health =
      config.workerHealthPort > 0
        ? await startHealthServer({
            host: config.host,
            port: config.workerHealthPort,
            metrics: running.metrics,
            isDraining: () => draining,
            checks: {
              postgres: async () => void (await orm.em.fork().execute('select 1')),
              redis: () => redis.check(),
              ...storageReadinessCheck(config.storage),
            },
          }).catch((error: unknown) => {
            // Several workers on one host share the default port: the first serves probes, the rest go on without.
            logger.warn({ err: error, port: config.workerHealthPort }, 'health server not started (set WORKER_HEALTH_PORT per worker)');
            return undefined;
          })
        : undefined;
  })();
  await started;
  logger.info({ concurrency: config.workerConcurrency, healthPort: config.workerHealthPort }, 'worker started');
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
