import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../config.ts';
import { clientOptions, probeKey, reconnectDelayMs, redisTarget, type ConnectionKind } from './connections.ts';
import { hashTagOf, keySlot } from './hash-slot.ts';

const SENTINELS = { REDIS_SENTINELS: 's1:26379,s2:26380', REDIS_SENTINEL_NAME: 'mymaster' };
const CLUSTER = { REDIS_CLUSTER_NODES: 'n1:7000,n2:7001', QUEUE_PREFIX: '{runtasks}' };
const KINDS: ConnectionKind[] = ['durable', 'fail-fast', 'probe'];

const single = (env: Record<string, string>, kind: ConnectionKind) => {
  const made = clientOptions(loadConfig(env), kind);
  if (made.cluster) throw new Error('expected a node');
  return made.options;
};
const cluster = (env: Record<string, string>, kind: ConnectionKind) => {
  const made = clientOptions(loadConfig({ ...CLUSTER, ...env }), kind, { commandTimeoutMs: 1_500 });
  if (!made.cluster) throw new Error('expected a cluster');
  return made;
};

describe('connection options by mode', () => {
  it('one node: the address, credentials and database of REDIS_URL', () => {
    expect(single({ REDIS_URL: 'redis://user:p%40ss@cache.internal:6380/3' }, 'durable')).toMatchObject({
      host: 'cache.internal',
      port: 6380,
      username: 'user',
      password: 'p@ss',
      db: 3,
    });
    expect(single({ REDIS_URL: 'redis://[::1]/0' }, 'durable')).toMatchObject({ host: '::1', port: 6379, db: 0 });
    expect(single({}, 'durable').tls).toBeUndefined();
  });

  it('sentinel: the sentinels, the name, their password; the primary as REDIS_URL authenticates; no failover detector', () => {
    const options = single({ ...SENTINELS, REDIS_SENTINEL_PASSWORD: 'sp', REDIS_URL: 'redis://:dp@ignored/2' }, 'durable');
    expect(options).toMatchObject({
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26380 },
      ],
      name: 'mymaster',
      sentinelPassword: 'sp',
      password: 'dp',
      db: 2,
      role: 'master',
      failoverDetector: false,
    });
    expect(options.sentinelRetryStrategy).toBe(reconnectDelayMs);
    expect(options.enableTLSForSentinelMode).toBeUndefined();
  });

  it('cluster: the nodes, credentials for each node, database 0 only, reads from primaries', () => {
    const made = cluster({ REDIS_URL: 'redis://u:dp@ignored/0' }, 'durable');
    expect(made.nodes).toEqual([
      { host: 'n1', port: 7000 },
      { host: 'n2', port: 7001 },
    ]);
    expect(made.options).toMatchObject({ scaleReads: 'master', enableOfflineQueue: true, lazyConnect: false });
    expect(made.options.redisOptions).toMatchObject({ username: 'u', password: 'dp', db: undefined });
    expect(made.options.clusterRetryStrategy).toBe(reconnectDelayMs);
    // A node's connection gets no retry strategy of its own from us (the cluster reconnects).
    expect(made.options.redisOptions).not.toHaveProperty('retryStrategy');
  });

  it.each(['durable', 'fail-fast'] as const)('cluster, %s: rides out a failover for as long as the kind allows', (kind) => {
    const { options } = cluster({}, kind);
    const rideOutMs = (options.maxRedirections ?? 0) * (options.retryDelayOnFailover ?? 0);
    if (kind === 'durable') expect(rideOutMs).toBeGreaterThanOrEqual(30_000);
    else expect(rideOutMs).toBeLessThanOrEqual(5_000);
  });
});

describe('connection options by kind', () => {
  it('durable: retries forever, keeps commands, reconnects with the fleet delay, reconnects on READONLY', () => {
    const options = single({}, 'durable');
    expect(options.maxRetriesPerRequest).toBeNull();
    expect(options.enableOfflineQueue).toBeUndefined();
    expect(options.retryStrategy).toBe(reconnectDelayMs);
    const reconnect = options.reconnectOnError as (error: Error) => unknown;
    expect(reconnect(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(reconnect(new Error('ERR wrong number of arguments'))).toBe(false);
  });

  it('fail-fast: keeps nothing, one retry, the command timeout asked for', () => {
    const made = clientOptions(loadConfig({}), 'fail-fast', { commandTimeoutMs: 1_000 });
    expect(made.options).toMatchObject({
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: 1_000,
      connectTimeout: 3_000,
    });
    expect(cluster({}, 'fail-fast').options).toMatchObject({ enableOfflineQueue: false });
    expect(cluster({}, 'fail-fast').options.redisOptions).toMatchObject({ commandTimeout: 1_500, maxRetriesPerRequest: 1 });
  });

  it('probe: connects when asked, once', () => {
    const options = single({}, 'probe');
    expect(options).toMatchObject({ lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    expect((options.retryStrategy as (attempt: number) => unknown)(1)).toBeNull();
    expect((single(SENTINELS, 'probe').sentinelRetryStrategy as (attempt: number) => unknown)(1)).toBeNull();
    expect(cluster({}, 'probe').options.lazyConnect).toBe(true);
    expect((cluster({}, 'probe').options.clusterRetryStrategy as (attempt: number) => unknown)(1)).toBeNull();
  });
});

describe('TLS (rediss://)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rt-ca-'));
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, 'not really a certificate, only its bytes');

  it.each(KINDS)('%s: every mode speaks TLS, with REDIS_TLS_CA as the authorities when given', (kind) => {
    const tls = { REDIS_URL: 'rediss://:p@cache.internal:6380/0', REDIS_TLS_CA: caFile };
    expect(String(single(tls, kind).tls?.ca)).toBe('not really a certificate, only its bytes');
    expect(single({ REDIS_URL: 'rediss://cache.internal/0' }, kind).tls).toEqual({});
    const sentinel = single({ ...SENTINELS, ...tls }, kind);
    expect(sentinel.enableTLSForSentinelMode).toBe(true);
    expect(sentinel.sentinelTLS).toBe(sentinel.tls);
    const { options } = cluster(tls, kind);
    expect(String(options.redisOptions?.tls?.ca)).toBe('not really a certificate, only its bytes');
    // Nodes are reached by the names given, which their certificates name.
    let resolved = '';
    options.dnsLookup?.('n1.internal', (_error, address) => (resolved = address));
    expect(resolved).toBe('n1.internal');
  });
});

describe('redisTarget: what start-up messages name', () => {
  it.each([
    [{ REDIS_URL: 'redis://:secret@cache:6379/0' }, 'REDIS_URL', 'redis://:***@cache:6379/0'],
    [SENTINELS, 'REDIS_SENTINELS', 's1:26379,s2:26380 (primary mymaster)'],
    [CLUSTER, 'REDIS_CLUSTER_NODES', 'n1:7000,n2:7001'],
  ])('%j → %s=%s', (env, variable, value) => {
    expect(redisTarget(loadConfig(env))).toEqual({ variable, value });
  });
});

describe('hash slots', () => {
  it('computes slots as Redis Cluster does', () => {
    // Test vectors from the Redis Cluster specification and CLUSTER KEYSLOT.
    expect(keySlot('123456789')).toBe(0x31c3 % 16384);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('somekey')).toBe(11058);
    expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    // An empty tag: the whole key is hashed.
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
  });

  it.each([
    ['{runtasks}', 'runtasks'],
    ['rt-{prod}-x', 'prod'],
    ['runtasks', undefined],
    ['rt{}', undefined],
    ['rt}{x', undefined],
  ])('the hash tag of %j is %j', (prefix, tag) => {
    expect(hashTagOf(prefix)).toBe(tag);
  });

  it('the probe key lives in the slot of the queue prefix', () => {
    expect(keySlot(probeKey('{runtasks}'))).toBe(keySlot('{runtasks}:runs:meta'));
  });
});
