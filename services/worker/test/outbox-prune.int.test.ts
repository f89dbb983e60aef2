import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { QUEUES } from '@runtasks/shared/queue';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Pool } from 'pg';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { eventually } from '../../../test/support/fixtures.ts';
import { OutboxRelay, pruneOutbox, PRUNE_EVENTS_SQL } from '../src/outbox-relay.ts';

/**
 * The outbox keeps published events for seven days. A prune deletes the older ones from the head of
 * the primary key, a bounded batch per statement, and never an event that is not published yet.
 */
describe('pruning the outbox', () => {
  let h: Harness;
  let pool: Pool;
  beforeAll(async () => {
    h = await startHarness();
    pool = await nativePool(h.orm.em);
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Adds events in this order (ids grow), each published that many days ago, or not published (null). */
  const addEvents = async (publishedDaysAgo: (number | null)[]): Promise<string[]> => {
    const ids: string[] = [];
    for (const [index, days] of publishedDaysAgo.entries()) {
      const { rows } = await pool.query<{ id: string }>(
        `insert into outbox_events (topic, aggregate_id, payload, created_at, published_at, publish_attempts)
         values ('run.advance', $1, '{}', now() - make_interval(days => 8), now() - make_interval(days => $2::int), 1) returning id`,
        [`run-prune-${index}`, days],
      );
      ids.push(rows[0]?.id ?? '');
    }
    return ids;
  };
  const remaining = async (): Promise<string[]> =>
    (await pool.query<{ id: string }>('select id from outbox_events order by id')).rows.map((row) => row.id);

  it('deletes the events published over seven days ago, oldest first, and keeps the unpublished and the recent ones', async () => {
    await pool.query('delete from outbox_events');
    const [old1, unpublished, old2, old3, recent1, recent2, oldAfterRecent] = await addEvents([8, null, 9, 8, 1, 0, 8]);
    // Two rows a statement: [old1, unpublished] deletes one, [unpublished, old2] one, [unpublished, old3]
    // one, [unpublished, recent1] none, which ends it.
    expect(await pruneOutbox(pool, 2, 10)).toBe(3);
    // An old event behind a recent one waits until the head reaches it.
    expect(await remaining()).toEqual([unpublished, recent1, recent2, oldAfterRecent]);
    expect([old1, old2, old3].every((id) => id !== '')).toBe(true);
  });

  it('makes at most the statements it is given', async () => {
    await pool.query('delete from outbox_events');
    const [first, second, third] = await addEvents([10, 10, 10]);
    expect(await pruneOutbox(pool, 1, 2)).toBe(2);
    expect(await remaining()).toEqual([third]);
    expect([first, second]).not.toContain(third);
  });

  it('is done by a running relay, with no event to publish', async () => {
    await pool.query('delete from outbox_events');
    const [old, recent] = await addEvents([8, 1]);
    const redis = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    const queue = new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix });
    const relay = new OutboxRelay({ orm: h.orm, queue, databaseUrl: h.config.databaseUrl, pollIntervalMs: 200, logger: h.logger });
    try {
      await relay.start();
      await eventually(async () => ((await remaining()).includes(old ?? '') ? undefined : true));
      expect(await remaining()).toEqual([recent]);
    } finally {
      await relay.stop();
      await queue.obliterate({ force: true });
      await queue.close();
      redis.disconnect();
    }
  });

  it('reads the head of the primary key, never the whole table', async () => {
    await pool.query('delete from outbox_events');
    await pool.query(
      `insert into outbox_events (topic, aggregate_id, payload, created_at, published_at, publish_attempts)
       select 'run.advance', 'run-' || n, '{}', now(), now(), 1 from generate_series(1, 3000) n`,
    );
    await pool.query('analyze outbox_events');
    const plan = (await pool.query<{ 'QUERY PLAN': string }>(`explain (costs off) ${PRUNE_EVENTS_SQL.replace('$1', '5000')}`)).rows
      .map((line) => line['QUERY PLAN'])
      .join('\n');
    expect(plan).toContain('outbox_events_pkey');
    expect(plan).not.toContain('Seq Scan');
  });
});
