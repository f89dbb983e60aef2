import { DEFAULT_DATABASE_URL, DEFAULT_REDIS_URL, type Config } from '@runtasks/shared/config';
import { type Logger } from '@runtasks/shared/logger';
import { onEmbeddedServer, startEmbeddedServices, type EmbeddedServices } from '@runtasks/shared/embedded';

/**
 * `npm start` on a machine with nothing but Node: for DATABASE_URL or REDIS_URL left unset, a PostgreSQL
 * and a Redis of its own (RUNTASKS_EMBEDDED), and the configuration pointed at them. Never for
 * `start:api` or `start:worker`, which always name their services.
 */
export async function startOneMachineServices(config: Config, logger: Logger): Promise<{ config: Config; embedded?: EmbeddedServices }> {
  const embedded = await startEmbeddedServices({
    mode: config.embedded.mode,
    dataDir: config.dataDir,
    postgres: { urlSet: config.embedded.databaseUrlSet, defaultUrl: DEFAULT_DATABASE_URL, variable: 'DATABASE_URL' },
    redis: { urlSet: config.embedded.redisUrlSet, defaultUrl: DEFAULT_REDIS_URL, variable: 'REDIS_URL' },
    say: (line) => logger.info(line),
  });
  if (!embedded) return { config };
  return {
    embedded,
    config: {
      ...config,
      databaseUrl: embedded.postgres ? onEmbeddedServer(config.databaseUrl, embedded.postgres.url) : config.databaseUrl,
      redisUrl: embedded.redis ? onEmbeddedServer(config.redisUrl, embedded.redis.url) : config.redisUrl,
    },
  };
}
