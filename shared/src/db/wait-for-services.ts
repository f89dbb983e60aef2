import pg from 'pg';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { pingRedis, redisTarget } from '../queue/connections.ts';
import { ensureDatabaseExists, redactUrl } from './bootstrap.ts';
import { connectionName } from './connection-name.ts';
import { postgresUnreachableMessage, redisUnreachableMessage } from './startup-errors.ts';

/** The first wait between two attempts; each next one doubles, up to the cap. */
const FIRST_WAIT_MS = 500;
const MAX_WAIT_MS = 5_000;
/** What no wait mends: a refused password (PostgreSQL's 28P01/28000, Redis's WRONGPASS/NOAUTH). */
const POSTGRES_REFUSALS: ReadonlySet<string> = new Set(['28P01', '28000']);
const REDIS_REFUSALS = /WRONGPASS|NOAUTH|invalid password/i;

/** One backing service to wait for: how to reach it, and what its failures mean. */
interface Service {
  name: string;
  variable: string;
  /** The variable's value as logs may show it (no password). */
  shown: string;
  probe: () => Promise<void>;
  /** Today's one-line message for a failure, or undefined when it is not about reaching the service (thrown as it is). */
  unreachable: (error: unknown) => string | undefined;
  /** A failure no wait mends (a refused password): reported at once. */
  refused: (error: unknown) => boolean;
}

/** The start-up failure of a service that did not answer in time: its message is the one line to print. */
export class ServiceUnreachableError extends Error {}

/** Connects as the process will (the URL's database, its application_name) and asks `select 1`. */
async function probePostgres(databaseUrl: string): Promise<void> {
  const client = new pg.Client({
    connectionString: databaseUrl,
    application_name: connectionName(databaseUrl),
    connectionTimeoutMillis: 5000,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    await client.end().catch(() => undefined);
  }
}

const reason = (error: unknown): string => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : error instanceof Error ? error.message : String(error);
};

async function waitFor(service: Service, deadline: number, logger: Logger, timeoutSeconds: number): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await service.probe();
      if (attempt > 1) logger.info(`${service.name} answers at ${service.variable}=${service.shown} after ${attempt} attempts`);
      return;
    } catch (error) {
      const message = service.unreachable(error);
      if (message === undefined) throw error;
      const left = deadline - Date.now();
      if (service.refused(error) || left <= 0) throw new ServiceUnreachableError(message, { cause: error });
      const waitMs = Math.min(FIRST_WAIT_MS * 2 ** (attempt - 1), MAX_WAIT_MS, left);
      logger.warn(
        { attempt, retryInMs: waitMs },
        `Waiting for ${service.name} at ${service.variable}=${service.shown} (${reason(error)}): attempt ${attempt}, next in ${(waitMs / 1000).toFixed(1)} s, ${Math.ceil(left / 1000)} s left of STARTUP_TIMEOUT_SECONDS=${timeoutSeconds}`,
      );
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
}

/**
 * Start-up waits for PostgreSQL and then Redis, with a doubling wait (0.5 s up to 5 s) for as long as
 * STARTUP_TIMEOUT_SECONDS allows, logging one line per attempt: under a process manager or `docker
 * compose up`, a process started before its database is up waits for it instead of exiting and flapping.
 * Past the timeout it throws ServiceUnreachableError with the one-line message start-up always printed.
 * `createDatabase` (npm start): the database is created once the server answers.
 */
export async function waitForBackingServices(options: {
  config: Pick<Config, 'databaseUrl' | 'redisUrl' | 'redisTopology' | 'redisTlsCaFile' | 'queuePrefix' | 'startupTimeoutMs'>;
  logger: Logger;
  createDatabase?: boolean;
  requireRedis?: boolean;
}): Promise<void> {
  const { config, logger } = options;
  const deadline = Date.now() + config.startupTimeoutMs;
  const timeoutSeconds = config.startupTimeoutMs / 1000;
  const postgres: Service = {
    name: 'PostgreSQL',
    variable: 'DATABASE_URL',
    shown: redactUrl(config.databaseUrl),
    probe: options.createDatabase
      ? async () => void (await ensureDatabaseExists(config.databaseUrl))
      : () => probePostgres(config.databaseUrl),
    unreachable: (error) => postgresUnreachableMessage(error, config.databaseUrl),
    refused: (error) => POSTGRES_REFUSALS.has(reason(error)),
  };
  await waitFor(postgres, deadline, logger, timeoutSeconds);
  if (options.requireRedis === false) return;
  const target = redisTarget(config);
  const redis: Service = {
    name: 'Redis',
    variable: target.variable,
    shown: target.value,
    probe: () => pingRedis(config),
    unreachable: (error) => redisUnreachableMessage(error, config),
    refused: (error) => error instanceof Error && REDIS_REFUSALS.test(error.message),
  };
  await waitFor(redis, deadline, logger, timeoutSeconds);
}
