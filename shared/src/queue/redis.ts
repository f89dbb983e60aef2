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

/** Longest wait between two reconnection attempts of a worker connection (ioredis' own default waits up to 5.2 s). */
export const MAX_RECONNECT_DELAY_MS = 2_000;

/** Doubling from 50 ms, at most MAX_RECONNECT_DELAY_MS, with up to 10 % jitter so a fleet does not reconnect in step. */
export function reconnectDelayMs(attempt: number): number {
  const base = Math.min(50 * 2 ** Math.max(0, attempt - 1), MAX_RECONNECT_DELAY_MS);
  return Math.round(base * (0.9 + Math.random() * 0.1));
}

/**
 * Connections for BullMQ workers must retry forever (BullMQ's production guide). `onDuplicate` sees the
 * connections BullMQ derives from this one (a worker's blocking connection), which the caller would
 * otherwise never get to look at.
 */
export function workerConnection(url: string, onDuplicate?: (client: Redis) => void): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: null, retryStrategy: reconnectDelayMs });
  if (onDuplicate) {
    const duplicate = client.duplicate.bind(client);
    client.duplicate = (override) => {
      const copy = duplicate(override);
      onDuplicate(copy);
      return copy;
    };
  }
  return client;
}

/** True once every one of `waits` has resolved, or false when `timeoutMs` passes first. */
async function allWithin(waits: readonly (Promise<void> | undefined)[], timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([Promise.all(waits).then(() => true as const), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves true once every client is connected, or false when `timeoutMs` passes first. */
export async function whenAllReady(clients: readonly Redis[], timeoutMs: number): Promise<boolean> {
  const waiting = clients.filter((client) => client.status !== 'ready');
  if (waiting.length === 0) return true;
  return allWithin(
    waiting.map(
      (client) => new Promise<void>((resolve) => (client.status === 'ready' ? resolve() : client.once('ready', () => resolve()))),
    ),
    timeoutMs,
  );
}

/**
 * Disconnects every client and resolves once each connected one has ended (its socket closed), true,
 * or when `timeoutMs` passes first, false. ioredis' `disconnect` returns at once and leaves a socket
 * that has not closed yet to a 2 s timer of its own, which would outlive the close of whoever owns the
 * clients. A client that is not connected (Redis away, between two attempts) is not waited for: it may
 * never emit 'end'. One that has ended is left alone.
 */
export async function disconnectAll(clients: readonly Redis[], timeoutMs: number): Promise<boolean> {
  return allWithin(
    clients.map((client) => {
      // Disconnecting one that has ended (BullMQ ends its blocking connection itself) would arm that
      // timer on a socket already closed, which nothing clears.
      if (client.status === 'end') return undefined;
      const connected = client.status === 'ready' || client.status === 'connect';
      const closed = connected ? new Promise<void>((resolve) => client.once('end', () => resolve())) : undefined;
      client.disconnect();
      return closed;
    }),
    timeoutMs,
  );
}
