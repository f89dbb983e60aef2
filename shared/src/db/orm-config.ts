import { Migrator } from '@mikro-orm/migrations';
import { defineConfig, type Options } from '@mikro-orm/postgresql';
import type { Pool, PoolClient } from 'pg';
import { ENTITIES } from './entities/index.ts';
import { MIGRATIONS } from './migrations/index.ts';
import { connectionName } from './connection-name.ts';

type Release = (error?: Error | boolean) => void;

/**
 * Kysely (MikroORM's driver layer) gives a transaction's connection back to the pool only after its
 * COMMIT or ROLLBACK succeeded. When PostgreSQL goes away mid-transaction both fail, the client stays
 * checked out for good, and once `pool.max` clients have leaked that way every query waits for a
 * connection in vain: the process never recovers from a database restart. So a checked-out client
 * whose connection ended is handed back here, with an error (the pool discards it), and a second
 * release of a client is a no-op (Kysely's own may still come after ours).
 */
function releaseClientsWhoseConnectionEnded(pool: Pool): void {
  pool.on('connect', (client: PoolClient) => {
    let release: Release | undefined;
    // pg-pool assigns a fresh release function at every checkout; hand out a once-only wrapper.
    Object.defineProperty(client, 'release', {
      configurable: true,
      set: (next: Release) => {
        release = next;
      },
      get: () => (error?: Error | boolean) => {
        const current = release;
        release = undefined;
        current?.(error);
      },
    });
    client.on('end', () => client.release(new Error('the connection to PostgreSQL ended')));
  });
}

export interface SessionLimits {
  /**
   * PostgreSQL's `statement_timeout` for every connection of the pool (0 or absent: none). A backstop:
   * a statement stuck behind a lock nobody releases (an operator's, a frozen process's) would otherwise
   * hold its connection, and the request or job waiting on it, for as long as the lock lasts.
   */
  statementTimeoutMs?: number;
}

/** One ORM configuration for the API, the worker, the CLI and the tests. */
export function ormConfig(databaseUrl: string, overrides: Partial<Options> = {}, limits: SessionLimits = {}): Options {
  return defineConfig({
    clientUrl: databaseUrl,
    entities: ENTITIES,
    extensions: [Migrator],
    discovery: { warnWhenNoEntities: true },
    // Each request and job forks its own EntityManager; touching the global one is a bug.
    allowGlobalContext: false,
    migrations: {
      // Listed explicitly so the same code runs from source under Node's type stripping, in Jest and in Docker.
      migrationsList: MIGRATIONS,
      path: 'shared/src/db/migrations',
      emit: 'ts',
      snapshot: false,
      transactional: true,
      allOrNothing: true,
    },
    pool: { min: 0, max: 10 },
    driverOptions: {
      connectionTimeoutMillis: 5000,
      // A process frozen mid-transaction (SIGSTOP, a VM pause, a blocked event loop) would otherwise hold its
      // row locks until it wakes, and every callback for those stages would queue behind them and take the
      // API's pool with it. None of our transactions waits on anything outside PostgreSQL, so 10 s idle
      // inside one means the client is stuck: PostgreSQL ends that session and its locks go.
      idle_in_transaction_session_timeout: 10_000,
      ...(limits.statementTimeoutMs ? { statement_timeout: limits.statementTimeoutMs } : {}),
      onPoolCreated: releaseClientsWhoseConnectionEnded,
      // MikroORM passes pg only the host, port, user, password and database of the URL; the whole URL
      // reaches pg too, so its parameters (sslmode and the other ssl ones, options, application_name)
      // apply to the pool as they do to every other connection of ours.
      connectionString: databaseUrl,
      application_name: connectionName(databaseUrl),
    },
    debug: false,
    ...overrides,
  });
}
