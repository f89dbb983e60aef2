import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loadConfig } from '@runtasks/shared/config';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { connectRedis, crc16, disconnectAll, JOBS, keySlot, QUEUES, type RedisClient, type RedisSettings } from '@runtasks/shared/queue';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { RedisClusterSet } from './support/redis-topologies.ts';

/**
 * Redis Cluster and BullMQ: BullMQ runs multi-key Lua scripts, which a cluster accepts only when every
 * key lies in one hash slot. With QUEUE_PREFIX=`{tag}` every key of the queue hashes on `tag` alone.
 * Checked on a standalone Redis by computing each key's slot as the cluster would, and on a real cluster
 * of the test's own, which refuses the queue's scripts without the tag (CROSSSLOT).
 */
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0';

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
async function exercise(prefix: string, settings?: RedisSettings): Promise<string[]> {
  const clients: RedisClient[] = [];
  const connection = () => {
    if (!settings) return { url: REDIS_URL, maxRetriesPerRequest: null };
    const client = connectRedis(settings, 'durable');
    clients.push(client);
    return client;
  };
  if (!settings) prefixes.push(prefix);
  const queue = new Queue(QUEUES.runs, { connection: connection(), prefix });
  const worker = new Worker(QUEUES.runs, async (job) => job.name, { connection: connection(), prefix, autorun: false });
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
    // Connections given to BullMQ are the giver's to close.
    await disconnectAll(clients, 5_000);
  }
  return settings ? [] : keysUnder(prefix);
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
    // The check value of CRC16/XMODEM; the slots are tested table by table in shared/src/queue/connections.test.ts.
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
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

describe('a real Redis Cluster (three primaries, a replica each)', () => {
  let cluster: RedisClusterSet;
  const settings = (prefix: string): RedisSettings => loadConfig({ ...cluster.env(), QUEUE_PREFIX: `{${prefix}}` });

  beforeAll(async () => {
    cluster = await RedisClusterSet.start();
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('runs the queue with a {hash tag} prefix, and agrees on the slot', async () => {
    const tag = `rt-${randomAlphanumeric(10)}`;
    await exercise(`{${tag}}`, settings(tag));
    const client = await cluster.primaryClientOf(`{${tag}}`);
    try {
      expect(await client.call('CLUSTER', 'KEYSLOT', `{${tag}}:${QUEUES.runs}:meta`)).toBe(keySlot(tag));
      expect(await client.exists(`{${tag}}:${QUEUES.runs}:meta`)).toBe(1);
    } finally {
      client.disconnect();
    }
  }, 60_000);

  it("refuses the queue's scripts without one (CROSSSLOT), which is why the service refuses to start so", async () => {
    const tagged = settings('any');
    // The configuration would refuse this prefix; the connection is made by hand to show the cluster's answer.
    const untagged: RedisSettings = { ...tagged, queuePrefix: `rt-${randomAlphanumeric(10)}` };
    const client = connectRedis(untagged, 'durable');
    const queue = new Queue(QUEUES.runs, { connection: client, prefix: untagged.queuePrefix });
    try {
      await expect(queue.add(JOBS.runAdvance, { runId: 'run-a' })).rejects.toThrow(/CROSSSLOT/);
    } finally {
      await queue.close();
      await disconnectAll([client], 5_000);
    }
  }, 60_000);
});
