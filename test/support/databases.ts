import { existsSync } from 'node:fs';
import pg from 'pg';

/** Test databases live beside the service's own, under a prefix CI sets to keep its runs apart. */
export const SERVER_URL = process.env['TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432';
export const BASE_PREFIX = process.env['TEST_DATABASE_PREFIX'] ?? 'runtasks_test';
/**
 * One prefix per Jest run (`<base>_r<pid of the run>`): global setup fixes it for the workers it starts,
 * so two runs on one server (two developers, a developer and CI) never drop each other's databases.
 */
export const PREFIX = process.env['TEST_RUN_DATABASE_PREFIX'] ?? `${BASE_PREFIX}_r${process.pid}`;
export const TEMPLATE = `${PREFIX}_template`;

/** Databases under the base prefix that no live run owns: those of runs that ended without cleaning up. */
export async function abandonedDatabases(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ datname: string }>(`select datname from pg_database where starts_with(datname, $1)`, [
    `${BASE_PREFIX}_`,
  ]);
  return rows
    .map((row) => row.datname)
    .filter((name) => {
      const owner = new RegExp(`^${BASE_PREFIX}_r(\\d+)_`).exec(name)?.[1];
      return owner === undefined || !existsSync(`/proc/${owner}`);
    });
}

export const databaseUrl = (name: string): string => `${SERVER_URL}/${name}`;

export async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl('postgres') });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export async function dropDatabase(client: pg.Client, name: string): Promise<void> {
  await client.query(`update pg_database set datistemplate = false where datname = $1`, [name]);
  await client.query(`drop database if exists ${client.escapeIdentifier(name)} with (force)`);
}
