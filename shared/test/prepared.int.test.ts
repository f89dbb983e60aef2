import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { clientRunner, inTransaction, isDeadlock, nativePool, numbered, prepared, runPrepared } from '../src/db/prepared.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';

describe('prepared statements and pool transactions', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
    await h.orm.em.fork().execute(`create table prepared_probe (id int primary key, note text)`);
  });
  afterAll(async () => {
    await h.close();
  });

  it('numbers `?` placeholders in order', () => {
    expect(numbered('select ? as a, ?::text as b where x = ?')).toBe('select $1 as a, $2::text as b where x = $3');
    expect(numbered('select 1')).toBe('select 1');
  });

  it('refuses a second statement of the same name (PostgreSQL would refuse it per connection)', () => {
    prepared('probe-unique', 'select 1');
    expect(() => prepared('probe-unique', 'select 2')).toThrow(/declared twice/);
  });

  it('runs a named statement again and again on the shared pool, with repeated parameters', async () => {
    const statement = prepared('probe-echo', 'select $1::int + $1::int as twice, $2::text as note');
    const pool = await nativePool(h.orm.em.fork());
    for (let value = 0; value < 12; value += 1) {
      const [row] = await runPrepared<{ twice: number; note: string }>(pool, statement, [value, `n${value}`]);
      expect(row).toEqual({ twice: 2 * value, note: `n${value}` });
    }
  });

  it('commits the work of a transaction, and rolls all of it back when it throws', async () => {
    const pool = await nativePool(h.orm.em.fork());
    await inTransaction(pool, (client) => clientRunner(client).execute(`insert into prepared_probe values (?, ?)`, [1, 'kept']));
    await expect(
      inTransaction(pool, async (client) => {
        await clientRunner(client).execute(`insert into prepared_probe values (?, ?)`, [2, 'lost']);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const rows = await h.orm.em.fork().execute<{ id: number; note: string }[]>(`select id, note from prepared_probe order by id`);
    expect(rows).toEqual([{ id: 1, note: 'kept' }]);
    // Every client went back to the pool: none is left checked out.
    expect(pool.totalCount - pool.idleCount).toBe(0);
  });

  it('recognises a deadlock by its SQLSTATE', () => {
    expect(isDeadlock(Object.assign(new Error('deadlock detected'), { code: '40P01' }))).toBe(true);
    expect(isDeadlock(Object.assign(new Error('unique'), { code: '23505' }))).toBe(false);
  });
});
