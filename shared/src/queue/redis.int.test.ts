import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Redis } from 'ioredis';
import { createLogger } from '../logger.ts';
import { eventually } from '../../../test/support/fixtures.ts';
import { SocketDestroyTimers } from '../../../test/support/ioredis-timers.ts';
import { freePort, PrivateRedis } from '../../../test/support/processes.ts';
import { reconnectDelayMs, singleNodeSettings, type RedisClient } from './connections.ts';
import { disconnectAll, RedisConnections, whenAllReady } from './redis.ts';

const opened: RedisConnections[] = [];
/** A durable connection, as a worker opens one, to the Redis at `url`. */
function workerConnection(url: string, onDuplicate?: (client: RedisClient) => void): RedisClient {
  const connections = new RedisConnections(singleNodeSettings(url), createLogger('silent', 'test'));
  opened.push(connections);
  return connections.open('durable', { onDuplicate });
}
afterAll(async () => {
  await Promise.all(opened.map((connections) => connections.close(5_000)));
});

/**
 * The worker's connections on a private redis-server that is stopped and started: what its graceful
 * close relies on to tell whether every connection, BullMQ's duplicates included, is back.
 */
describe('worker connections', () => {
  let redis: PrivateRedis;
  const clients: RedisClient[] = [];

  beforeAll(async () => {
    redis = new PrivateRedis(await freePort());
    await redis.start();
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
    await redis?.stop();
  });

  function connect(onDuplicate?: (client: RedisClient) => void): RedisClient {
    const client = workerConnection(redis.url, onDuplicate);
    client.on('error', () => undefined);
    clients.push(client);
    return client;
  }

  it('report every duplicate made of them, with the options of the original', async () => {
    const seen: RedisClient[] = [];
    const client = connect((copy) => seen.push(copy)) as Redis;
    const copy = client.duplicate({ connectionName: 'blocking' });
    copy.on('error', () => undefined);
    clients.push(copy);
    expect(seen).toEqual([copy]);
    expect(copy.options.maxRetriesPerRequest).toBeNull();
    expect(copy.options.connectionName).toBe('blocking');
    expect(await whenAllReady([client, copy], 5_000)).toBe(true);
  });

  it('whenAllReady: false while Redis is away (after the timeout), true once every client is back', async () => {
    const first = connect();
    const second = connect();
    expect(await whenAllReady([first, second], 5_000)).toBe(true);

    await redis.stop();
    await eventually(async () => (first.status !== 'ready' && second.status !== 'ready' ? true : undefined));
    expect(await whenAllReady([first, second], 300)).toBe(false);

    const back = whenAllReady([first, second], 10_000);
    await redis.start();
    expect(await back).toBe(true);
    expect([first.status, second.status]).toEqual(['ready', 'ready']);
  }, 30_000);
});

describe('disconnectAll', () => {
  let redis: PrivateRedis;
  beforeAll(async () => {
    redis = new PrivateRedis(await freePort());
    await redis.start();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('resolves once every connected client has ended, and leaves one that had ended alone', async () => {
    const first = workerConnection(redis.url);
    const second = workerConnection(redis.url);
    const ended = workerConnection(redis.url);
    expect(await whenAllReady([first, second, ended], 5_000)).toBe(true);
    await ended.quit();
    await eventually(async () => (ended.status === 'end' ? true : undefined));
    const timers = new SocketDestroyTimers();
    timers.track();
    await disconnectAll([ended], 5_000);
    expect(timers.armed).toBe(0);
    await timers.settle();
    expect(await disconnectAll([first, second], 5_000)).toBe(true);
    expect([first.status, second.status]).toEqual(['end', 'end']);
  });

  it('does not wait for a client that is not connected (Redis away)', async () => {
    const client = workerConnection(redis.url);
    client.on('error', () => undefined);
    expect(await whenAllReady([client], 5_000)).toBe(true);
    await redis.stop();
    await eventually(async () => (client.status !== 'ready' ? true : undefined));
    const timers = new SocketDestroyTimers();
    timers.track();
    // Resolved, not timed out (false after 60 s).
    expect(await disconnectAll([client], 60_000)).toBe(true);
    // The dead socket's timer, which ioredis arms, has run before the suite ends.
    await timers.settle();
    await redis.start();
  }, 30_000);
});

describe('reconnectDelayMs', () => {
  it.each([
    [1, 45, 50],
    [2, 90, 100],
    [5, 720, 800],
    [6, 1_440, 1_600],
    [7, 1_800, 2_000],
    [50, 1_800, 2_000],
  ])('attempt %d waits between %d and %d ms', (attempt, low, high) => {
    for (let sample = 0; sample < 50; sample += 1) {
      const delay = reconnectDelayMs(attempt);
      expect(delay).toBeGreaterThanOrEqual(low);
      expect(delay).toBeLessThanOrEqual(high);
    }
  });

  it('worker connections and their duplicates use it', () => {
    const client = workerConnection('redis://127.0.0.1:1/0') as Redis;
    client.on('error', () => undefined);
    const copy = client.duplicate();
    copy.on('error', () => undefined);
    try {
      expect(client.options.retryStrategy).toBe(reconnectDelayMs);
      expect(copy.options.retryStrategy).toBe(reconnectDelayMs);
    } finally {
      client.disconnect();
      copy.disconnect();
    }
  });
});
