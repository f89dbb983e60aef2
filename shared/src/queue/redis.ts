import { Cluster, type Redis } from 'ioredis';
import type { Logger } from '../logger.ts';
import { RedisAvailability } from './availability.ts';
import {
  connectRedis,
  probeKey,
  redisNodeOf,
  type ConnectionKind,
  type ConnectionOptions,
  type RedisClient,
  type RedisSettings,
} from './connections.ts';

/** How long a command of the process's own fail-fast connection (readiness, probes, rate limits) may wait. */
export const COMMAND_TIMEOUT_MS = 1_000;

export interface OpenOptions extends ConnectionOptions {
  /** Sees each connection BullMQ derives from this one (a worker's blocking connection), which the caller would otherwise never get to look at. */
  onDuplicate?: (client: RedisClient) => void;
}

/**
 * The Redis connections of one process, and the one way to get one: each is built from the
 * configuration (a single node, a primary through sentinels, or a cluster; connections.ts), watched for
 * availability with those BullMQ derives from it, so that an outage or a failover is logged as one
 * warning when Redis goes and one when it is back, and closed with the others. It keeps one fail-fast
 * connection of its own for readiness, probes and whoever needs quick commands (the rate limiter).
 */
export class RedisConnections {
  readonly settings: RedisSettings;
  readonly availability: RedisAvailability;
  /** The fail-fast connection: readiness, the availability probe, rate limits. */
  readonly commands: RedisClient;
  private readonly clients: RedisClient[] = [];
  private closing = false;
  private readonly logger: Logger;
  /** Connections dropped on purpose (see retire): their errors say nothing of Redis. */
  private readonly retired = new WeakSet<RedisClient>();
  /** The connections BullMQ derived from each one (its blocking connections), retired with it. */
  private readonly copies = new WeakMap<RedisClient, RedisClient[]>();

  constructor(settings: RedisSettings, logger: Logger) {
    this.settings = settings;
    this.logger = logger;
    this.availability = new RedisAvailability({
      logger,
      probe: async () => void (await this.write()),
      allConnected: () => this.clients.every((client) => client.status === 'ready' || client.status === 'end' || client.status === 'wait'),
      describe: () => ({ mode: settings.redisTopology.mode, node: this.node() }),
    });
    this.commands = this.open('fail-fast', { commandTimeoutMs: COMMAND_TIMEOUT_MS });
  }

  get mode(): RedisSettings['redisTopology']['mode'] {
    return this.settings.redisTopology.mode;
  }

  /** A new connection of `kind` to the configured Redis, watched and closed with the others. */
  open(kind: Exclude<ConnectionKind, 'probe'>, options: OpenOptions = {}): RedisClient {
    const client = connectRedis(this.settings, kind, options);
    this.watch(client);
    if (options.onDuplicate) {
      const onDuplicate = options.onDuplicate;
      const duplicate = client.duplicate.bind(client) as (...args: unknown[]) => RedisClient;
      // Both Redis#duplicate(options) and Cluster#duplicate(nodes, options): the arguments pass as they are.
      (client as { duplicate: (...args: unknown[]) => RedisClient }).duplicate = (...args: unknown[]) => {
        const copy = duplicate(...args);
        this.copies.set(client, [...(this.copies.get(client) ?? []), copy]);
        this.watch(copy);
        onDuplicate(copy);
        return copy;
      };
    }
    return client;
  }

  /**
   * Marks a connection, and those BullMQ derived from it, as being dropped on purpose (a replaced
   * worker's): the commands they still had fail with "Connection is closed" while Redis serves, which
   * is no outage. Their errors are logged at debug level from then on.
   */
  retire(client: RedisClient): void {
    for (const retiring of [client, ...(this.copies.get(client) ?? [])]) this.retired.add(retiring);
  }

  /** The node the process talks to for its queue (see redisNodeOf), as its fail-fast connection sees it. */
  node(): string | undefined {
    return redisNodeOf(this.commands, this.settings.queuePrefix);
  }

  /** Readiness: Redis takes a write in the queue's slot. Resolves with the mode and the node that took it. */
  async check(): Promise<{ mode: string; node: string }> {
    await this.write();
    return { mode: this.mode, node: this.node() ?? 'unknown' };
  }

  /** Resolves true once every connection is connected, or false when `timeoutMs` passes first. */
  whenAllReady(timeoutMs: number): Promise<boolean> {
    return whenAllReady(this.clients, timeoutMs);
  }

  /** Disconnects every connection (see disconnectAll); the availability warnings stop first. */
  async close(timeoutMs: number): Promise<boolean> {
    this.closing = true;
    this.availability.stop();
    return disconnectAll(this.clients, timeoutMs);
  }

  private async write(): Promise<void> {
    await this.commands.set(probeKey(this.settings.queuePrefix), '1', 'PX', 10_000);
  }

  /**
   * A lost connection shows as errors: its reconnection attempts fail while Redis is away, and through
   * sentinels until one names the promoted replica. A close alone is not an outage: the sentinels' news
   * of a failover closes connections on purpose, to move them to the new primary, which they reach at once.
   */
  private watch(client: RedisClient): void {
    this.clients.push(client);
    const report = (error: unknown, message: string, fields: Record<string, unknown> = {}): void => {
      if (this.retired.has(client)) this.logger.debug({ err: error, ...fields }, `${message} (a connection dropped on purpose)`);
      else this.availability.report(error, message, fields);
    };
    client.on('error', (error: unknown) => report(error, 'redis connection error'));
    if (client instanceof Cluster) {
      client.on('node error', (error: unknown, node: string) => report(error, 'redis cluster node error', { node }));
      // A cluster retries the commands of a primary that went away until its replica takes over, without
      // an error, and drops the node's connection: when that primary is the queue's, Redis is away for us.
      client.on('-node', (node: Redis) => {
        const key = `${node.options.host}:${node.options.port}`;
        // Not when the client itself is being closed (by its owner, or BullMQ's close).
        if (
          !this.closing &&
          !this.retired.has(client) &&
          client.status === 'ready' &&
          key === redisNodeOf(client, this.settings.queuePrefix)
        )
          this.availability.reportLost(new Error(`Connection is closed (cluster node ${key})`));
      });
    }
  }
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
export async function whenAllReady(clients: readonly RedisClient[], timeoutMs: number): Promise<boolean> {
  // Ended ones (closed on purpose) never connect again; lazy ones not yet asked for are not waited for.
  const waiting = clients.filter((client) => client.status !== 'ready' && client.status !== 'end' && client.status !== 'wait');
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
export async function disconnectAll(clients: readonly RedisClient[], timeoutMs: number): Promise<boolean> {
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
