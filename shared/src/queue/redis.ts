import { Redis } from 'ioredis';

/** Resolves when Redis answers PING, or rejects quickly: used at start-up and by readiness checks. */
export async function pingRedis(url: string, timeoutMs = 3000): Promise<void> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
  } finally {
    client.disconnect();
  }
}

/** Connections for BullMQ workers must retry forever (BullMQ's production guide). */
export function workerConnection(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null });
}
