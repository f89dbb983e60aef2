import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { connectionName } from './connection-name.ts';
import { ormConfig, type SessionLimits } from './orm-config.ts';

/** The URL with any password replaced, safe for logs and start-up messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparseable URL)';
  }
}

function databaseName(databaseUrl: string): string {
  return decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
}

/** Creates the database named in the URL when it does not exist yet (first start on a new machine). */
export async function ensureDatabaseExists(databaseUrl: string): Promise<boolean> {
  const name = databaseName(databaseUrl);
  const maintenanceUrl = new URL(databaseUrl);
  maintenanceUrl.pathname = '/postgres';
  const client = new pg.Client({
    connectionString: maintenanceUrl.toString(),
    application_name: connectionName(databaseUrl),
    connectionTimeoutMillis: 5000,
  });
  await client.connect();
  try {
    const existing = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (existing.rowCount) return false;
    try {
      await client.query(`create database ${client.escapeIdentifier(name)}`);
    } catch (error) {
      // Another process created it between our check and our create.
      if ((error as { code?: string }).code !== '42P04') throw error;
    }
    return true;
  } finally {
    await client.end();
  }
}

export async function openOrm(databaseUrl: string, poolMax = 10, limits: SessionLimits = {}): Promise<MikroORM> {
  return MikroORM.init(ormConfig(databaseUrl, { pool: { min: 0, max: poolMax } }, limits));
}

/**
 * Applies pending migrations, all or none, in one transaction that lifts the pool's statement timeout:
 * a migration may rewrite or index a whole table, which the backstop for requests and jobs is not for.
 */
export async function migrateUp(orm: MikroORM): Promise<string[]> {
  const connection = orm.em.getConnection();
  const applied = await connection.transactional(async (transaction) => {
    await connection.execute('set local statement_timeout = 0', [], 'run', transaction);
    return orm.migrator.up({ transaction });
  });
  return applied.map((migration) => migration.name);
}

export async function pendingMigrations(orm: MikroORM): Promise<string[]> {
  const pending = await orm.migrator.getPending();
  return pending.map((migration) => migration.name);
}
