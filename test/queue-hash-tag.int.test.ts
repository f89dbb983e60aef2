import { afterAll, describe, expect, it } from '@jest/globals';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { JOBS, QUEUES } from '@runtasks/shared/queue';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';

/**
 * Redis Cluster readiness: BullMQ runs multi-key Lua scripts, which a cluster accepts only when every key
 * lies in one hash slot. With QUEUE_PREFIX=`{tag}` every key of the queue hashes on `tag` alone. Checked
 * here on a standalone Redis by computing each key's slot as the cluster would (no cluster needed).
 */
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0';

/** CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster uses for key slots. */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}

/** The cluster slot of a key: only the part between the first `{` and the next `}` counts, when it is not empty. */
function keySlot(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return crc16(Buffer.from(key.slice(open + 1, close))) % 16384;
  }
  return crc16(Buffer.from(key)) % 16384;
}

const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
const prefixes: string[] = [];

/** Every key under `prefix:`; `[`, `]`, `*`, `?` and `\` are escaped for MATCH (braces are literal). */
async function keysUnder(prefix: string): Promise<string[]> {
  const pattern = `${prefix.replace(/[[\]*?\\]/g, '\\$&')}:*`;
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/** Uses the queue as the service does: jobs now, delayed, with ids, a scheduler, and a worker completing some. */
async function exercise(prefix: string): Promise<string[]> {
  prefixes.push(prefix);
  const connection = { url: REDIS_URL, maxRetriesPerRequest: null };
  const queue = new Queue(QUEUES.runs, { connection, prefix });
  const worker = new Worker(QUEUES.runs, async (job) => job.name, { connection, prefix, autorun: false });
  try {
    await queue.add(JOBS.runCreated, { runId: 'run-a' }, { jobId: 'run-created.run-a' });
    await queue.add(JOBS.runAdvance, { runId: 'run-b' });
    await queue.add(JOBS.taskDeadline, { resultId: 'taskrs-a' }, { jobId: 'task-deadline.taskrs-a', delay: 60_000 });
    await queue.add(
      JOBS.taskDispatch,
      { resultId: 'taskrs-b' },
      { delay: 30_000, attempts: 3, backoff: { type: 'exponential', delay: 500 } },
    );
    await queue.upsertJobScheduler(JOBS.sweep, { every: 60_000 }, { name: JOBS.sweep, data: {} });
    const completed = new Promise<void>((resolve) => {
      let count = 0;
      worker.on('completed', () => {
        count += 1;
        if (count === 2) resolve();
      });
    });
    void worker.run();
    await completed;
    expect(await queue.getDelayedCount()).toBeGreaterThanOrEqual(2);
  } finally {
    await worker.close();
    await queue.close();
  }
  return keysUnder(prefix);
}

afterAll(async () => {
  for (const prefix of prefixes) {
    const keys = await keysUnder(prefix);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

describe('QUEUE_PREFIX with a {hash tag} (Redis Cluster)', () => {
  it('computes slots as Redis Cluster does', () => {
    // Test vectors from the Redis Cluster specification and CLUSTER KEYSLOT.
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('somekey')).toBe(11058);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{}{bar}')).toBe(keySlot('foo{}{bar}')); // empty tag: the whole key is hashed
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
  });

  it('puts every key of the runs queue in the slot of the tag', async () => {
    const tag = `rt-${randomAlphanumeric(10)}`;
    const keys = await exercise(`{${tag}}`);

    expect(keys.length).toBeGreaterThan(5);
    // Keys of every kind the service makes: queue structures, job hashes, delayed set, scheduler.
    expect(keys).toEqual(
      expect.arrayContaining([
        `{${tag}}:${QUEUES.runs}:meta`,
        `{${tag}}:${QUEUES.runs}:delayed`,
        `{${tag}}:${QUEUES.runs}:completed`,
        `{${tag}}:${QUEUES.runs}:run-created.run-a`,
        `{${tag}}:${QUEUES.runs}:repeat`,
      ]),
    );
    const slots = new Set(keys.map(keySlot));
    expect([...slots]).toEqual([keySlot(tag)]);
  });

  it('spreads the keys over several slots without a hash tag', async () => {
    const keys = await exercise(`rt-${randomAlphanumeric(10)}`);

    expect(keys.length).toBeGreaterThan(5);
    expect(new Set(keys.map(keySlot)).size).toBeGreaterThan(1);
  });
});
