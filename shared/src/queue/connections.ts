import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { readFileSync } from 'node:fs';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import type { Config, HostPort, RedisTopology } from '../config.ts';
import { keySlot } from './hash-slot.ts';

/** A connection to Redis: one node (single or found through sentinels) or a cluster. */
export type RedisClient = Redis | Cluster;

/** The configuration a connection is built from. */
export type RedisSettings = Pick<Config, 'redisUrl' | 'redisTopology' | 'redisTlsCaFile' | 'queuePrefix'>;

/**
 * How a connection behaves while Redis is away:
 * - `durable`: reconnects forever and keeps commands until Redis is back (BullMQ's workers and the
 *   queues they publish through; BullMQ's production guide asks this of a worker's connections);
 * - `fail-fast`: keeps nothing; a command fails at once while not connected and after
 *   `commandTimeoutMs` when Redis does not answer (request paths: rate limits, readiness, the API's
 *   publication of a created run);
 * - `probe`: connects when asked, once (start-up checks).
 */
export type ConnectionKind = 'durable' | 'fail-fast' | 'probe';

export interface ConnectionOptions {
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
}

/** Longest wait between two reconnection attempts (ioredis' own default waits up to 5.2 s). */
export const MAX_RECONNECT_DELAY_MS = 2_000;

/** Doubling from 50 ms, at most MAX_RECONNECT_DELAY_MS, with up to 10 % jitter so a fleet does not reconnect in step. */
export function reconnectDelayMs(attempt: number): number {
  const base = Math.min(50 * 2 ** Math.max(0, attempt - 1), MAX_RECONNECT_DELAY_MS);
  return Math.round(base * (0.9 + Math.random() * 0.1));
}

/**
 * While a cluster fails a primary over (its replica is promoted once `cluster-node-timeout` has passed,
 * 15 s by default), a command for that primary's slots fails with a closed connection or CLUSTERDOWN;
 * ioredis tries it again every `retryDelayOnFailover`, at most `maxRedirections` times. A durable
 * connection rides out about 40 s of that; a fail-fast one gives up with its command timeout.
 */
const CLUSTER_RETRY_DELAY_MS = 250;
const DURABLE_CLUSTER_REDIRECTIONS = 160;

/**
 * A node that became a replica (a failed-over primary back, or a DNS name now pointing at a replica)
 * answers writes with READONLY: reconnect (through the sentinels, to the primary) and send the command
 * again rather than fail it.
 */
const reconnectOnReadOnly = (error: Error): 2 | false => (error.message.startsWith('READONLY') ? 2 : false);

const decoded = (value: string): string | undefined => (value === '' ? undefined : decodeURIComponent(value));

/** The data nodes' credentials, database and TLS, from REDIS_URL (whose host only single mode uses). */
function nodeOptions(settings: RedisSettings): RedisOptions {
  const url = new URL(settings.redisUrl);
  const database = url.pathname.replace(/^\//, '');
  const options: RedisOptions = {
    username: decoded(url.username),
    password: decoded(url.password),
    db: database === '' ? 0 : Number(database),
  };
  if (url.protocol === 'rediss:') options.tls = tlsOptions(settings);
  return options;
}

function tlsOptions(settings: RedisSettings): TlsOptions {
  return settings.redisTlsCaFile ? { ca: readFileSync(settings.redisTlsCaFile) } : {};
}

function kindOptions(kind: ConnectionKind, options: ConnectionOptions): RedisOptions {
  const connectTimeout = options.connectTimeoutMs ?? 3_000;
  if (kind === 'durable') return { maxRetriesPerRequest: null, retryStrategy: reconnectDelayMs, reconnectOnError: reconnectOnReadOnly };
  if (kind === 'fail-fast')
    return {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout,
      retryStrategy: reconnectDelayMs,
      reconnectOnError: reconnectOnReadOnly,
    };
  return {
    lazyConnect: true,
    connectTimeout,
    commandTimeout: options.commandTimeoutMs ?? connectTimeout,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  };
}

function singleOptions(settings: RedisSettings, kind: ConnectionKind, options: ConnectionOptions): RedisOptions {
  const url = new URL(settings.redisUrl);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? 6379 : Number(url.port),
    ...nodeOptions(settings),
    ...kindOptions(kind, options),
  };
}

function sentinelOptions(
  settings: RedisSettings,
  topology: Extract<RedisTopology, { mode: 'sentinel' }>,
  kind: ConnectionKind,
  options: ConnectionOptions,
): RedisOptions {
  const node = nodeOptions(settings);
  const tls = node.tls ? { enableTLSForSentinelMode: true, sentinelTLS: node.tls } : {};
  return {
    sentinels: topology.sentinels,
    name: topology.name,
    sentinelPassword: topology.sentinelPassword,
    role: 'master',
    ...node,
    ...tls,
    ...kindOptions(kind, options),
    // No failover detector: its news of a switch can cut a reconnection short, and the connection then
    // ends for good (ioredis 6.0.0: the connector's connect rejects once disconnected, and the client
    // takes that as final). Nothing is lost without it: a primary that dies drops its connections, and
    // the sentinels, when they demote one alive, kill its clients' connections themselves (CLIENT KILL
    // TYPE normal), so that they reconnect through the sentinels to the new primary.
    failoverDetector: false,
    sentinelRetryStrategy: kind === 'probe' ? () => null : reconnectDelayMs,
  };
}

function clusterOptions(settings: RedisSettings, kind: ConnectionKind, options: ConnectionOptions): ClusterOptions {
  const node = nodeOptions(settings);
  // Each node's connection takes what the kind says of commands; reconnection and queueing belong to
  // the cluster client (ioredis gives a node's connection no retry strategy of its own).
  const { retryStrategy: _retry, enableOfflineQueue, lazyConnect, reconnectOnError: _reconnect, ...perNode } = kindOptions(kind, options);
  return {
    redisOptions: { ...node, db: undefined, ...perNode },
    scaleReads: 'master',
    enableOfflineQueue: enableOfflineQueue ?? true,
    lazyConnect: lazyConnect ?? false,
    clusterRetryStrategy: kind === 'probe' ? () => null : reconnectDelayMs,
    retryDelayOnFailover: CLUSTER_RETRY_DELAY_MS,
    retryDelayOnClusterDown: CLUSTER_RETRY_DELAY_MS,
    retryDelayOnTryAgain: CLUSTER_RETRY_DELAY_MS,
    maxRedirections: kind === 'durable' ? DURABLE_CLUSTER_REDIRECTIONS : 16,
    // With TLS a node is reached by the name it was given, which its certificate names, not the address it resolves to.
    ...(node.tls ? { dnsLookup: (address: string, callback: (error: null, address: string) => void) => callback(null, address) } : {}),
  };
}

/** What a connection of `kind` is made with: a node's options (one node, or one found through sentinels), or a cluster's. */
export type ClientOptions = { cluster: false; options: RedisOptions } | { cluster: true; nodes: HostPort[]; options: ClusterOptions };

export function clientOptions(settings: RedisSettings, kind: ConnectionKind, options: ConnectionOptions = {}): ClientOptions {
  const topology = settings.redisTopology;
  if (topology.mode === 'cluster') return { cluster: true, nodes: topology.nodes, options: clusterOptions(settings, kind, options) };
  if (topology.mode === 'sentinel') return { cluster: false, options: sentinelOptions(settings, topology, kind, options) };
  return { cluster: false, options: singleOptions(settings, kind, options) };
}

/** The settings of one Redis node at `url` (tools, tests, a start-up probe of a URL). */
export const singleNodeSettings = (url: string, queuePrefix = 'runtasks'): RedisSettings => ({
  redisUrl: url,
  redisTopology: { mode: 'single' },
  redisTlsCaFile: undefined,
  queuePrefix,
});

/** A new connection to the configured Redis, of the given kind. */
export function connectRedis(settings: RedisSettings, kind: ConnectionKind, options: ConnectionOptions = {}): RedisClient {
  const made = clientOptions(settings, kind, options);
  return made.cluster ? new Cluster(made.nodes, made.options) : new Redis(made.options);
}

const list = (nodes: readonly HostPort[]): string => nodes.map(({ host, port }) => `${host}:${port}`).join(',');

/** The variable that names the Redis to reach, and its value (without a password): for start-up messages. */
export function redisTarget(settings: RedisSettings): { variable: string; value: string } {
  const topology = settings.redisTopology;
  if (topology.mode === 'sentinel') return { variable: 'REDIS_SENTINELS', value: `${list(topology.sentinels)} (primary ${topology.name})` };
  if (topology.mode === 'cluster') return { variable: 'REDIS_CLUSTER_NODES', value: list(topology.nodes) };
  const url = new URL(settings.redisUrl);
  if (url.password) url.password = '***';
  return { variable: 'REDIS_URL', value: url.toString() };
}

/**
 * The key probes write (it expires by itself): beside the queue's keys, in the slot of the prefix's
 * hash tag in a cluster, so a probe asks the very primary the queue lives on.
 */
export const probeKey = (prefix: string): string => `${prefix}:probe`;

/**
 * The node this client talks to for the service's queue: the one it is connected to, or in a cluster
 * the primary of the queue's slot as the client last learned it. Undefined while not connected.
 */
export function redisNodeOf(client: RedisClient, prefix: string): string | undefined {
  if (client instanceof Cluster) return client.slots[keySlot(probeKey(prefix))]?.[0];
  // The socket's peer: for a sentinel connection the primary they named, not a sentinel.
  const stream = client.status === 'ready' ? (client.stream as { remoteAddress?: string; remotePort?: number } | undefined) : undefined;
  if (!stream?.remoteAddress) return undefined;
  return stream.remoteAddress.includes(':')
    ? `[${stream.remoteAddress}]:${stream.remotePort}`
    : `${stream.remoteAddress}:${stream.remotePort}`;
}

/**
 * Resolves when the configured Redis serves the queue's slot, or rejects quickly: a write, so that a
 * node answering but read-only (a replica) fails it. Used at start-up. A URL is a single node's.
 */
export async function pingRedis(target: string | RedisSettings, timeoutMs = 3_000): Promise<void> {
  const settings = typeof target === 'string' ? singleNodeSettings(target) : target;
  const client = connectRedis(settings, 'probe', { connectTimeoutMs: timeoutMs });
  // The first error says why (a refused password: WRONGPASS), where the failed connect says only that it closed.
  let first: unknown;
  const remember = (error: unknown): void => {
    first ??= error;
  };
  client.on('error', remember);
  client.on('node error', remember);
  try {
    await client.connect();
    await client.set(probeKey(settings.queuePrefix), '1', 'PX', 10_000);
  } catch (error) {
    throw first ?? error;
  } finally {
    client.disconnect();
  }
}
