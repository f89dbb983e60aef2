import { needsProbe, shouldEmbed, type EmbeddedMode } from '../domain/embedding.ts';
import { claimDataDir } from './owner.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './postgres.ts';
import { answers, EmbeddedError } from './processes.ts';
import { findRedisServer, REDIS_INSTALL_HINT, startPrivateRedis, type PrivateRedis } from './redis.ts';

export { EmbeddedError, isRunning } from './processes.ts';

/**
 * The one-machine start (`npm start`, `npm run demo`, `npm test`): for a URL left unset, a PostgreSQL
 * and a Redis of the process's own, under `dataDir`, when the mode asks for them (see `shouldEmbed`).
 */
export interface EmbeddedOptions {
  mode: EmbeddedMode;
  /** Where this process's embedded services keep their data (`.runtasks`, or a subdirectory of it). */
  dataDir: string;
  postgres: { urlSet: boolean; defaultUrl: string; variable: string };
  redis: { urlSet: boolean; defaultUrl: string; variable: string };
  /** One line per service started, for the operator. */
  say: (line: string) => void;
}

export interface EmbeddedServices {
  postgres?: EmbeddedPostgres;
  redis?: PrivateRedis;
  /** Stops what was started (Redis, then PostgreSQL) and releases the data directory. */
  stop(): Promise<void>;
}

async function defaultAnswers(url: string): Promise<boolean> {
  const { hostname, port, protocol } = new URL(url);
  return answers(hostname, Number(port || (protocol.startsWith('redis') ? 6379 : 5432)));
}

async function decide(mode: EmbeddedMode, service: EmbeddedOptions['postgres']): Promise<{ embed: boolean; why: string }> {
  const where = new URL(service.defaultUrl).host;
  if (!needsProbe(mode, service.urlSet)) {
    return { embed: shouldEmbed(mode, service.urlSet, true), why: `RUNTASKS_EMBEDDED=always and ${service.variable} is not set` };
  }
  const answered = await defaultAnswers(service.defaultUrl);
  return { embed: shouldEmbed(mode, service.urlSet, answered), why: `nothing answers at ${where} and ${service.variable} is not set` };
}

export async function startEmbeddedServices(options: EmbeddedOptions): Promise<EmbeddedServices | undefined> {
  const { mode, dataDir, say } = options;
  const pg = await decide(mode, options.postgres);
  const redis = await decide(mode, options.redis);
  if (!pg.embed && !redis.embed) return undefined;
  // Before anything starts: without a Redis binary the start fails as it did before this mode existed.
  if (redis.embed && !findRedisServer()) {
    throw new EmbeddedError(`No Redis: ${redis.why}, and neither redis-server nor valkey-server is on PATH: ${REDIS_INSTALL_HINT}.`);
  }

  const release = claimDataDir(dataDir);
  const services: EmbeddedServices = {
    async stop() {
      await services.redis?.stop();
      await services.postgres?.stop();
      release();
    },
  };
  try {
    if (pg.embed) {
      services.postgres = await startEmbeddedPostgres(dataDir, say);
      say(
        `Embedded PostgreSQL ${services.postgres.version} on 127.0.0.1:${services.postgres.port} (${pg.why}; data in ${dataDir}/pg, stopped with this process). ` +
          `To use a real server, set ${options.postgres.variable}=postgres://user@host:5432/... (RUNTASKS_EMBEDDED=never turns this off).`,
      );
    }
    if (redis.embed) {
      services.redis = await startPrivateRedis(dataDir, say);
      say(
        `Private Redis (${services.redis.binary}) on 127.0.0.1:${services.redis.port} (${redis.why}; data in ${dataDir}/redis, stopped with this process). ` +
          `To use a real server, set ${options.redis.variable}=redis://host:6379/0.`,
      );
    }
  } catch (error) {
    await services.stop();
    throw error;
  }
  return services;
}

/** `url` with its host and port replaced by the embedded server's, keeping its database name and parameters. */
export function onEmbeddedServer(url: string, serverUrl: string): string {
  const target = new URL(url);
  const server = new URL(serverUrl);
  target.host = server.host;
  target.username = server.username;
  target.password = '';
  return target.toString();
}
