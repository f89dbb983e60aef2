import { migrateUp, openOrm } from '@runtasks/shared/db';
import { abandonedDatabases, databaseUrl, dropDatabase, PREFIX, TEMPLATE, withAdminClient } from './support/databases.ts';

/** Migrates one template database; every test file clones it (CREATE DATABASE … TEMPLATE) in milliseconds. */
export default async function globalSetup(): Promise<void> {
  // The workers Jest starts next inherit this, and so use this run's prefix.
  process.env['TEST_RUN_DATABASE_PREFIX'] = PREFIX;
  await withAdminClient(async (client) => {
    for (const name of await abandonedDatabases(client)) await dropDatabase(client, name);
    await client.query(`create database ${client.escapeIdentifier(TEMPLATE)}`);
  });
  const orm = await openOrm(databaseUrl(TEMPLATE), 2);
  try {
    await migrateUp(orm);
  } finally {
    await orm.close();
  }
  await withAdminClient(async (client) => {
    await client.query(`update pg_database set datistemplate = true where datname = $1`, [TEMPLATE]);
  });
}
