import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { migrateUp, nativePool, openOrm } from '@runtasks/shared/db';
import pg from 'pg';
import { api, createRun, seedOrganization, uniqueName, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { holdLock } from '../../../test/support/locks.ts';

/**
 * DATABASE_STATEMENT_TIMEOUT_MS, a backstop on every connection of the API's pool: a statement stuck
 * behind a lock that nobody releases (an operator's, a frozen process's) ends, its request answers
 * 503 and its connection serves again, instead of both being held for as long as the lock lasts.
 * Migrations lift it: they may rewrite a whole table, and waiting for a lock is their job. So do the
 * cascading deletes of a workspace or an organization, which keep a lock timeout of the same length.
 */
// Long enough that no ordinary statement of this file reaches it, even on a machine busy with the whole suite.
const TIMEOUT_MS = 1000;

describe('DATABASE_STATEMENT_TIMEOUT_MS', () => {
  let h: Harness;
  let org: Fixture;
  beforeAll(async () => {
    h = await startHarness({ env: { DATABASE_STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS) } });
    org = await seedOrganization(h, uniqueName('timeout'));
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is set on the connections of the pool that requests use', async () => {
    const { rows } = await (
      await nativePool(h.orm.em)
    ).query<{ timeout: string }>(`select setting as timeout from pg_settings where name = 'statement_timeout'`);
    expect(rows[0]?.timeout).toBe(String(TIMEOUT_MS));
  });

  it('a request waiting on a lock answers 503 with Retry-After at the timeout, changes nothing, and every connection serves again', async () => {
    const runId = await createRun(h, org.organizationToken, org.workspaceId, { 'auto-apply': false });
    const before = await api(h, 'get', `/runs/${runId}`, org.organizationToken);
    expect(before.status).toBe(200);
    const lock = await holdLock(h.config.databaseUrl, 'lock table runs in access exclusive mode');
    let answers: { status: number; retryAfter: unknown; title: unknown }[];
    try {
      // More requests than the pool has connections (5): each waits, is cut off, and hands its connection on.
      answers = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const res = await api(h, 'get', `/runs/${runId}`, org.organizationToken);
          return { status: res.status, retryAfter: res.headers['retry-after'], title: res.body?.errors?.[0]?.title };
        }),
      );
    } finally {
      await lock.release();
    }
    expect(answers).toEqual(Array.from({ length: 8 }, () => ({ status: 503, retryAfter: '5', title: 'service unavailable' })));
    // The lock is gone: every connection of the pool serves again, and the run is as it was.
    const after = await Promise.all(Array.from({ length: 5 }, () => api(h, 'get', `/runs/${runId}`, org.organizationToken)));
    expect(after.map((res) => res.status)).toEqual([200, 200, 200, 200, 200]);
    expect(after[0]?.body.data.attributes).toEqual(before.body.data.attributes);
  });

  it('a write behind a lock is refused whole: 503, and nothing of it is kept', async () => {
    const lock = await holdLock(h.config.databaseUrl, 'lock table workspaces in access exclusive mode');
    const name = uniqueName('stuck');
    let res: Awaited<ReturnType<typeof api>>;
    try {
      res = await api(h, 'post', `/organizations/${org.organization}/workspaces`, org.organizationToken, {
        data: { type: 'workspaces', attributes: { name } },
      });
    } finally {
      await lock.release();
    }
    expect(res.status).toBe(503);
    expect((await api(h, 'get', `/organizations/${org.organization}/workspaces/${name}`, org.organizationToken)).status).toBe(404);
  });

  /** A workspace or an organization to delete, its table, and the path that deletes and shows it. */
  const doomed = {
    'a workspace': async () => {
      const name = uniqueName('doomed-ws');
      const created = await api(h, 'post', `/organizations/${org.organization}/workspaces`, org.organizationToken, {
        data: { type: 'workspaces', attributes: { name } },
      });
      const path = `/workspaces/${created.body.data.id}`;
      return { table: 'workspaces', token: org.organizationToken, path };
    },
    'an organization': async () => {
      const other = await seedOrganization(h, uniqueName('doomed-org'));
      const path = `/organizations/${other.organization}`;
      return { table: 'organizations', token: h.adminToken, path };
    },
  } as const;

  it.each(Object.keys(doomed) as (keyof typeof doomed)[])(
    'deleting %s takes as long as its cascade needs: the statement timeout is lifted for it',
    async (kind) => {
      const target = await doomed[kind]();
      // The cascade of years of runs, standing in: three timeouts of work inside the DELETE itself.
      const admin = new pg.Client({ connectionString: h.config.databaseUrl });
      await admin.connect();
      try {
        await admin.query(`create or replace function slow_cascade() returns trigger language plpgsql as $$
          begin perform pg_sleep(${(3 * TIMEOUT_MS) / 1000}); return old; end $$`);
        await admin.query(`create trigger slow_cascade before delete on ${target.table} for each row execute function slow_cascade()`);
        const res = await api(h, 'delete', target.path, target.token);
        expect(res.status).toBe(204);
      } finally {
        await admin.query(`drop trigger if exists slow_cascade on ${target.table}`);
        await admin.end();
      }
      expect((await api(h, 'get', target.path, h.adminToken)).status).toBe(404);
    },
  );

  it.each(Object.keys(doomed) as (keyof typeof doomed)[])(
    'deleting %s waits for a lock no longer than the timeout: 503, and nothing is deleted',
    async (kind) => {
      const target = await doomed[kind]();
      // The cascade must delete from runs, which this lock keeps to itself.
      const lock = await holdLock(h.config.databaseUrl, 'lock table runs in access exclusive mode');
      let res: Awaited<ReturnType<typeof api>>;
      try {
        res = await api(h, 'delete', target.path, target.token);
      } finally {
        await lock.release();
      }
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBe('5');
      expect((await api(h, 'get', target.path, h.adminToken)).status).toBe(200);
    },
  );

  it('migrations are not cut short: migrateUp waits for a lock past the timeout', async () => {
    // Take the last migration back by hand, so that it is pending again on this database.
    const last = 'Migration20261125170000RunStagesPlanned';
    const admin = new pg.Client({ connectionString: h.config.databaseUrl });
    await admin.connect();
    try {
      await admin.query('alter table runs drop column stages_planned');
      await admin.query('delete from mikro_orm_migrations where name = $1', [last]);
    } finally {
      await admin.end();
    }
    const orm = await openOrm(h.config.databaseUrl, 2, { statementTimeoutMs: TIMEOUT_MS });
    try {
      // Its ALTER TABLE needs the table to itself: it waits for this lock, three timeouts long.
      const lock = await holdLock(h.config.databaseUrl, 'lock table runs in share mode');
      const heldMs = 3 * TIMEOUT_MS;
      const started = Date.now();
      const released = new Promise((resolve) => setTimeout(resolve, heldMs)).then(() => lock.release());
      const applied = await migrateUp(orm);
      await released;
      expect(applied).toEqual([last]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(heldMs);
      // Outside the migrations' transaction, the pool's own timeout still holds.
      const { rows } = await (
        await nativePool(orm.em)
      ).query<{ timeout: string }>(`select setting as timeout from pg_settings where name = 'statement_timeout'`);
      expect(rows[0]?.timeout).toBe(String(TIMEOUT_MS));
    } finally {
      await orm.close();
    }
    const column = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ n: number }[]>(
        `select count(*)::int as n from information_schema.columns where table_name = 'runs' and column_name = 'stages_planned'`,
      );
    expect(column[0]?.n).toBe(1);
  });
});
