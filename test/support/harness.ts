import type { MikroORM } from '@mikro-orm/postgresql';
import { loadConfig, type Config } from '@runtasks/shared/config';
import { createLogger, type Logger } from '@runtasks/shared/logger';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { openOrm } from '@runtasks/shared/db';
import { createTaskClient, type TaskClient } from '@runtasks/shared/outbound';
import { createSecretBox, type SecretBox } from '@runtasks/shared/security';
import { type Metrics } from '@runtasks/shared/ops';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { buildApp } from '../../services/api/src/app.ts';
import { issueToken } from '../../services/api/src/auth/tokens.ts';
import { createApiServer, SERVER_LIMITS } from '../../services/api/src/http/server.ts';
import type { ApiOpsHandle } from '../../services/api/src/ops/create-ops.ts';
import { databaseUrl, dropDatabase, PREFIX, TEMPLATE, withAdminClient } from './databases.ts';

export const TEST_SECRET_KEY = 'test-secret-key-0123456789abcdefghijklmnopqrstuvwxyz';

export interface Harness {
  config: Config;
  orm: MikroORM;
  secrets: SecretBox;
  logger: Logger;
  taskClient: TaskClient;
  server: Server;
  baseUrl: string;
  http: TestAgent;
  adminToken: string;
  /** Set when started with `ops: true`: rate limits, Redis and migration readiness, the dashboard. */
  ops: ApiOpsHandle | undefined;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  /** Make PUBLIC_BASE_URL the listening address, so task servers can call back (end-to-end tests). */
  reachableBaseUrl?: boolean;
  /** Build the API with `createApiOps` (as main.ts does). Default false: no limits, no dashboard, PostgreSQL readiness only. */
  ops?: boolean;
  /** Use this logger instead of one at TEST_LOG_LEVEL (tests that read the logs). */
  logger?: Logger;
  /** With `ops`: the registry to share (e.g. with an in-process worker). */
  metrics?: Metrics;
}

/**
 * A fresh database cloned from the migrated template, a unique queue prefix, and the API listening
 * on a loopback port. One per test file; `close()` drops everything it made.
 */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const name = `${PREFIX}_${process.env['JEST_WORKER_ID'] ?? '0'}_${randomAlphanumeric(8).toLowerCase()}`;
  await withAdminClient((client) =>
    client.query(`create database ${client.escapeIdentifier(name)} template ${client.escapeIdentifier(TEMPLATE)}`),
  );
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: databaseUrl(name),
    REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0',
    SECRET_KEY: TEST_SECRET_KEY,
    QUEUE_PREFIX: `test-${randomAlphanumeric(10)}`,
    LOG_LEVEL: process.env['TEST_LOG_LEVEL'] ?? 'silent',
    PUBLIC_BASE_URL: 'http://runtasks.test',
    OUTBOX_POLL_INTERVAL_MS: '200',
    // Task servers in tests listen on loopback; one suite checks that the default refuses it.
    TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
    ...options.env,
  });
  // As the API opens it (bootstrap.ts), with the configuration's statement timeout.
  const orm = await openOrm(config.databaseUrl, 5, { statementTimeoutMs: config.databaseStatementTimeoutMs });
  const secrets = createSecretBox(TEST_SECRET_KEY);
  const logger = options.logger ?? createLogger(config.logLevel, 'test');
  const taskClient = createTaskClient({ allowlist: config.taskDestinationAllowlist });
  // Loaded only when asked for (bull-board and friends), so other suites start as before.
  const ops = options.ops
    ? (await import('../../services/api/src/ops/create-ops.ts')).createApiOps({ config, orm, secrets, logger, metrics: options.metrics })
    : undefined;
  const app = buildApp({ config, orm, secrets, logger, taskClient, ops: ops?.ops });
  // The production server, with its limits (timeouts of slow and idle clients).
  const server: Server = await new Promise((resolve) => {
    const listening = createApiServer(app.callback(), { ...SERVER_LIMITS, bodyRate: config.uploadRate }).listen(0, '127.0.0.1', () =>
      resolve(listening),
    );
  });
  const { port } = server.address() as AddressInfo;
  // The app reads the configuration per request, so setting it after listen is seen by every request.
  if (options.reachableBaseUrl) Object.assign(config, { publicBaseUrl: `http://127.0.0.1:${port}` });
  const { secret: adminToken } = await issueToken(orm.em.fork(), secrets, { kind: 'admin', description: 'test' });
  return {
    config,
    orm,
    secrets,
    logger,
    taskClient,
    server,
    baseUrl: `http://127.0.0.1:${port}`,
    http: request(server),
    adminToken,
    ops,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ops?.close();
      await taskClient.close();
      await orm.close();
      await withAdminClient((client) => dropDatabase(client, name));
    },
  };
}
