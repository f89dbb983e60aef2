import { join } from 'node:path';
import { loadConfig } from '@runtasks/shared/config';
import { startEmbeddedServices, type EmbeddedServices } from '@runtasks/shared/embedded';

/**
 * The PostgreSQL and Redis of `npm test` and `npm run demo` on a machine with only Node: for a URL
 * variable left unset, an embedded PostgreSQL or a private Redis (RUNTASKS_EMBEDDED, as for
 * `npm start`) in `<RUNTASKS_DATA_DIR>/<purpose>`, apart from `npm start`'s own so both can run at once.
 * The variables are then set to them. CI sets TEST_POSTGRES_URL and starts a Redis at the default
 * address, so it never embeds. Throws EmbeddedError or ConfigError with a one-line message.
 */
export interface OwnServicesOptions {
  purpose: 'test' | 'demo';
  postgres: { variable: string; defaultUrl: string };
  redis: { variable: string; defaultUrl: string };
  say: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export async function startOwnServices(options: OwnServicesOptions): Promise<EmbeddedServices | undefined> {
  const env = options.env ?? process.env;
  const settings = loadConfig({
    NODE_ENV: env['NODE_ENV'],
    RUNTASKS_EMBEDDED: env['RUNTASKS_EMBEDDED'],
    RUNTASKS_DATA_DIR: env['RUNTASKS_DATA_DIR'],
  });
  return startEmbeddedServices({
    mode: settings.embedded.mode,
    dataDir: join(settings.dataDir, options.purpose),
    postgres: { ...options.postgres, urlSet: !!env[options.postgres.variable] },
    redis: { ...options.redis, urlSet: !!env[options.redis.variable] },
    say: options.say,
  });
}
