import { type Config } from '@runtasks/shared/config';
import { migrateUp, pendingMigrations } from '@runtasks/shared/db';
import { createTaskClient, type TaskClient } from '@runtasks/shared/outbound';
import { Metrics, onShutdownSignals } from '@runtasks/shared/ops';
import { RedisConnections } from '@runtasks/shared/queue';
import { startWorker, type RunningWorker } from '@runtasks/worker';
import type { Server } from 'node:http';
import { parseArgs } from 'node:util';
import { buildApp } from './app.ts';
import { ensureAdminToken, hasActiveAdminToken, issueToken } from './auth/tokens.ts';
import { bootstrap, runMain, StartupError } from './bootstrap.ts';
import { connectionCeiling, createApiServer, openFilesLimit, SERVER_LIMITS } from './http/server.ts';
import { createApiOps } from './ops/create-ops.ts';

/** Listens on HOST:PORT; a port taken (or an option the platform lacks) stops start-up in one line. */
function listen(app: ReturnType<typeof buildApp>, config: Config): Promise<Server> {
  const where = `${config.host}:${config.port}`;
  const refusal = (error: NodeJS.ErrnoException): StartupError =>
    new StartupError(
      error.code === 'EADDRINUSE'
        ? `PORT=${config.port} on ${config.host} is in use by another process (API processes on Linux can share it when each has REUSE_PORT=true).`
        : `Cannot listen on ${where}: ${error.message}`,
    );
  return new Promise((resolve, reject) => {
    const refuse = (error: NodeJS.ErrnoException): void => reject(refusal(error));
    try {
      // Room kept for what the process opens besides: its database pools (a worker's is half as large
      // again), Redis, LISTEN connections, files.
      const reserved = 2 * config.databasePoolSize + 64;
      const server = createApiServer(
        app.callback(),
        { ...SERVER_LIMITS, bodyRate: config.uploadRate },
        connectionCeiling(openFilesLimit(), reserved),
      );
      server.listen({ port: config.port, host: config.host, reusePort: config.reusePort }, () => {
        // Later server errors are not start-up's: they must not vanish into a settled promise.
        server.off('error', refuse);
        resolve(server);
      });
      server.once('error', refuse);
    } catch (error) {
      refuse(error as NodeJS.ErrnoException);
    }
  });
}

/**
 * `--role all` (the default, `npm start`): migrations, API and worker in one process, for one machine.
 * `--role api`: the API alone; workers run as `npm run start:worker`, as many as needed.
 */
runMain(async () => {
  const { values } = parseArgs({ options: { role: { type: 'string', default: 'all' } } });
  const role = values.role === 'api' ? 'api' : 'all';
  const runtime = await bootstrap({ name: `runtasks-${role}`, createDatabase: role === 'all', requireRedis: true, embed: role === 'all' });
  const { config, orm, logger } = runtime;

  // What start-up has started so far. Signals are handled from here on: one that comes during start-up
  // (the API answers before the worker has started) waits for it to end, then stops everything,
  // rather than killing the process.
  let operations: ReturnType<typeof createApiOps> | undefined;
  let taskClient: TaskClient | undefined;
  let server: Server | undefined;
  let worker: RunningWorker | undefined;
  let redis: RedisConnections | undefined;
  let started: Promise<void> = Promise.resolve();
  onShutdownSignals(logger, config.shutdownTimeoutMs, async () => {
    await started.catch(() => undefined);
    if (operations) {
      // Readiness answers 503 first, so load balancers stop sending before the listener closes.
      operations.startDraining();
      await new Promise((resolve) => setTimeout(resolve, config.shutdownDrainDelayMs));
    }
    // In-flight requests finish; idle keep-alive sockets are closed by Node.
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    // Active jobs finish; nothing new is taken.
    await worker?.close();
    await operations?.close();
    await redis?.close(3_000);
    await taskClient?.close();
    await orm.close();
    // Last: everything above may still write to them.
    await runtime.embedded?.stop();
  });

  started = (async () => {
    if (role === 'all') {
      const applied = await migrateUp(orm);
      if (applied.length > 0) logger.info({ applied }, 'migrations applied');
    } else {
      const pending = await pendingMigrations(orm);
      if (pending.length > 0) logger.warn({ pending }, 'migrations pending: run `npm run migrate`');
    }

    const em = orm.em.fork();
    if (config.adminToken) {
      await ensureAdminToken(em, runtime.secrets, config.adminToken);
    } else if (!(await hasActiveAdminToken(em))) {
      const { secret } = await issueToken(em, runtime.secrets, { kind: 'admin', description: 'first start' });
      // Printed once, to the terminal only: it is never logged or stored in plaintext.
      process.stdout.write(`\nSite-admin token (shown once; set ADMIN_TOKEN to choose your own):\n\n  ${secret}\n\n`);
    } else {
      logger.info('a site-admin token exists; create another with `npm run cli -- tokens:create --admin`');
    }

    taskClient = createTaskClient({ allowlist: config.taskDestinationAllowlist });
    // One registry for the process: with the worker in-process, /metrics shows both.
    const metrics = new Metrics();
    // One set of Redis connections for the process: with the worker in-process, an outage is told once.
    redis = new RedisConnections(config, logger);
    operations = createApiOps({ config, orm, secrets: runtime.secrets, logger, metrics, redis });
    const app = buildApp({ config, orm, secrets: runtime.secrets, logger, taskClient, ops: operations.ops });
    // Listening first: a process that cannot have its port stops before it has taken any job.
    server = await listen(app, config);
    if (role === 'all') worker = await startWorker({ config, orm, logger, secrets: runtime.secrets, taskClient, metrics, redis });
  })();
  await started;
  logger.info({ url: config.publicBaseUrl, host: config.host, port: config.port, role }, 'listening');
});
