import type { MikroORM } from '@mikro-orm/postgresql';
import { ConfigError, loadConfig, type Config } from '@runtasks/shared/config';
import { createLogger, type Logger } from '@runtasks/shared/logger';
import {
  ensureDatabaseExists,
  openOrm,
  postgresUnreachableMessage,
  redisUnreachableMessage,
  ServiceUnreachableError,
  waitForBackingServices,
} from '@runtasks/shared/db';
import { pingRedis } from '@runtasks/shared/queue';
import { createSecretBox, resolveSecretKey, type SecretBox } from '@runtasks/shared/security';
import { EmbeddedError, type EmbeddedServices } from '@runtasks/shared/embedded';
import { startOneMachineServices } from './embedded.ts';

/** A start-up failure with a one-line message for the operator; never a stack trace. */
export class StartupError extends Error {}

export interface Runtime {
  config: Config;
  orm: MikroORM;
  secrets: SecretBox;
  logger: Logger;
  /** The PostgreSQL and Redis this process started itself, stopped last on shutdown. */
  embedded?: EmbeddedServices;
}

export interface BootstrapOptions {
  name: string;
  createDatabase: boolean;
  requireRedis: boolean;
  /** May start an embedded PostgreSQL and a private Redis (`npm start` only). */
  embed?: boolean;
}

export async function bootstrap(options: BootstrapOptions): Promise<Runtime> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) throw new StartupError(error.message);
    throw error;
  }
  const logger = createLogger(config.logLevel, options.name);
  let secretKey: string;
  try {
    const resolved = resolveSecretKey(config);
    if (resolved.generated)
      logger.warn(`SECRET_KEY is not set: generated a development key in ${config.dataDir}/secret.key (set SECRET_KEY in production)`);
    secretKey = resolved.key;
  } catch (error) {
    if (error instanceof ConfigError) throw new StartupError(error.message);
    throw error;
  }
  // Should start-up fail after this, the process's exit signals them to stop (see startEmbeddedPostgres).
  const { config: effective, embedded } = options.embed ? await startOneMachineServices(config, logger) : { config, embedded: undefined };
  config = effective;
  try {
    await waitForBackingServices({ config, logger, createDatabase: options.createDatabase, requireRedis: options.requireRedis });
  } catch (error) {
    if (error instanceof ServiceUnreachableError) throw new StartupError(error.message);
    throw error;
  }
  let orm: MikroORM;
  try {
    if (options.createDatabase) await ensureDatabaseExists(config.databaseUrl);
    orm = await openOrm(config.databaseUrl, config.databasePoolSize, { statementTimeoutMs: config.databaseStatementTimeoutMs });
    await orm.em.getConnection().execute('select 1');
  } catch (error) {
    const message = postgresUnreachableMessage(error, config.databaseUrl);
    if (message) throw new StartupError(message);
    throw error;
  }
  if (options.requireRedis) {
    try {
      await pingRedis(config);
    } catch (error) {
      await orm.close();
      throw new StartupError(redisUnreachableMessage(error, config));
    }
  }
  return { config, orm, secrets: createSecretBox(secretKey), logger, embedded };
}

/** Runs a process entry point: start-up failures print one line and exit 1. */
export function runMain(main: () => Promise<void>): void {
  main().catch((error: unknown) => {
    if (error instanceof StartupError || error instanceof EmbeddedError) {
      process.stderr.write(`${error.message}\n`);
    } else {
      process.stderr.write(`Start-up failed: ${error instanceof Error ? error.message : String(error)}\n`);
    }
    process.exit(1);
  });
}
