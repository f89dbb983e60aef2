import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readdirSync } from 'node:fs';
import { MIGRATIONS } from '../src/db/migrations/index.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';

describe('schema', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('the checked-in migrations produce exactly the schema the entities describe', async () => {
    const drift = await h.orm.schema.getUpdateSchemaSQL({ wrap: false });
    expect(drift.trim()).toBe('');
  });

  it('lists every migration file in the migrations index', () => {
    const files = readdirSync(new URL('../src/db/migrations/', import.meta.url))
      .filter((file) => /^Migration\d+.*\.ts$/.test(file))
      .map((file) => file.replace(/\.ts$/, ''));
    expect(MIGRATIONS.map((migration) => migration.name).sort()).toEqual(files.sort());
  });

  it('has no pending migrations after the template was migrated', async () => {
    expect(await h.orm.migrator.getPending()).toEqual([]);
  });

  it('creates runs with an empty status-timestamps object, not a JSON string', async () => {
    const rows: { kind: string }[] = await h.orm.em
      .fork()
      .getConnection()
      .execute(
        `select column_default as kind from information_schema.columns where table_name = 'runs' and column_name = 'status_timestamps'`,
      );
    expect(rows[0]?.kind).toBe(`'{}'::jsonb`);
  });
});
