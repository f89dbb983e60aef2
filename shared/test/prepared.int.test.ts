import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  clientRunner,
  genericIndexPool,
  inTransaction,
  isDeadlock,
  nativePool,
  numbered,
  prepared,
  runPrepared,
  StatementShapes,
} from '../src/db/prepared.ts';
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

  it('outlives PostgreSQL ending the connection of a client idle in its transaction', async () => {
    // A pool of its own, as the worker's advances have (the ORM's has listeners of its own).
    const pool = genericIndexPool(await nativePool(h.orm.em.fork()), 1);
    let listening = 0;
    const outcome = inTransaction(pool, async (client) => {
      listening = client.listenerCount('error');
      const ended = new Promise((resolve) => client.once('end', resolve));
      const [row] = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows;
      // As idle_in_transaction_session_timeout does to a worker stopped mid-transaction: the FATAL
      // arrives with no query running, as an 'error' event that had no listener and ended the process.
      await h.orm.em.fork().execute('select pg_terminate_backend(?)', [row?.pid]);
      await ended;
      await client.query('select 1');
    });
    await expect(outcome).rejects.toThrow();
    // An 'error' event with no listener is thrown (EventEmitter), out of the socket's callback, and ends
    // the process: the pool listens to its idle clients only, so while out the client has its own.
    expect(listening).toBeGreaterThan(0);
    expect(pool.totalCount - pool.idleCount).toBe(0);
    expect((await pool.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    await pool.end();
  });

  it('prepares each shape of a statement family once per connection, up to its limit, and runs the rest unprepared', async () => {
    const shapes = new StatementShapes('probe-shapes', 2);
    const client = await (await nativePool(h.orm.em.fork())).connect();
    try {
      const texts = ['select $1::int as n', 'select $1::int + 1 as n', 'select $1::int + 2 as n'];
      const answers: number[] = [];
      for (const text of [texts[0], texts[1], texts[0], texts[2], texts[2]] as string[]) {
        const [row] = await shapes.run<{ n: number }>(client, text, [10]);
        answers.push(row?.n ?? Number.NaN);
      }
      expect(answers).toEqual([10, 11, 10, 12, 12]);
      const { rows } = await client.query<{ name: string; statement: string }>(
        `select name, statement from pg_prepared_statements where name like 'probe-shapes#%' order by name`,
      );
      // Two names for the two first texts (the first reused, not prepared again); the third past the limit has none.
      expect(rows).toEqual([
        { name: 'probe-shapes#1', statement: texts[0] },
        { name: 'probe-shapes#2', statement: texts[1] },
      ]);
    } finally {
      client.release();
    }
  });

  it('recognises a deadlock by its SQLSTATE', () => {
    expect(isDeadlock(Object.assign(new Error('deadlock detected'), { code: '40P01' }))).toBe(true);
    expect(isDeadlock(Object.assign(new Error('unique'), { code: '23505' }))).toBe(false);
  });
});
