import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../shared/src/config.ts';
import { EmbeddedError, startEmbeddedServices, type EmbeddedServices } from '../../shared/src/embedded/index.ts';

/**
 * The test runner's PostgreSQL and Redis on a machine with only Node: for TEST_POSTGRES_URL or
 * TEST_REDIS_URL left unset, an embedded PostgreSQL or a private Redis (RUNTASKS_EMBEDDED, as for
 * `npm start`) in `<RUNTASKS_DATA_DIR>/test`, apart from `npm start`'s own. The URLs are set for Jest.
 * CI sets TEST_POSTGRES_URL and starts a Redis at the default address, so it never embeds.
 */
export async function startTestServices(env: NodeJS.ProcessEnv = process.env): Promise<EmbeddedServices | undefined> {
  try {
    const settings = loadConfig({
      NODE_ENV: env['NODE_ENV'],
      RUNTASKS_EMBEDDED: env['RUNTASKS_EMBEDDED'],
      RUNTASKS_DATA_DIR: env['RUNTASKS_DATA_DIR'],
    });
    const embedded = await startEmbeddedServices({
      mode: settings.embedded.mode,
      dataDir: join(settings.dataDir, 'test'),
      postgres: { urlSet: !!env['TEST_POSTGRES_URL'], defaultUrl: 'postgres://postgres@127.0.0.1:5432', variable: 'TEST_POSTGRES_URL' },
      redis: { urlSet: !!env['TEST_REDIS_URL'], defaultUrl: 'redis://127.0.0.1:6379/0', variable: 'TEST_REDIS_URL' },
      say: (line) => process.stderr.write(`${line}\n`),
    });
    if (embedded?.postgres) env['TEST_POSTGRES_URL'] = embedded.postgres.url;
    if (embedded?.redis) env['TEST_REDIS_URL'] = embedded.redis.url;
    return embedded;
  } catch (error) {
    if (!(error instanceof EmbeddedError || error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
