import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loadConfig, type Config } from '@runtasks/shared/config';
import { createLogger } from '@runtasks/shared/logger';
import { pingRedis, probeKey, QUEUES, RedisConnections } from '@runtasks/shared/queue';
import { Queue, Worker } from 'bullmq';
import { spawn } from 'node:child_process';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { createRateLimiter } from '../../services/api/src/ops/rate-limit.ts';
import { eventually } from '../support/fixtures.ts';
import { RedisClusterSet, SentinelSet, SingleNode } from '../support/redis-topologies.ts';

/**
 * Every mode with TLS and passwords, on topologies of the test's own: a single node, a primary with a
 * replica and three sentinels (which have a password of their own), a cluster. Through the process's
 * connections (RedisConnections, the one way the service gets one): readiness names the mode and the
 * node, BullMQ's queue and worker carry jobs, the rate limiter counts in Redis, and start-up's probe
 * refuses a wrong password and a certificate it cannot check.
 */
const PASSWORD = 'tls-data-password';
const SENTINEL_PASSWORD = 'tls-sentinel-password';
const logger = createLogger('silent', 'test');

describe.each(['single', 'sentinel', 'cluster'] as const)('Redis %s over TLS with passwords', (mode) => {
  let topology: SingleNode | SentinelSet | RedisClusterSet;
  let config: Config;
  let connections: RedisConnections;
  const prefix = '{rt-tls}';

  beforeAll(async () => {
    const options = { password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD, tls: true };
    topology =
      mode === 'single'
        ? await SingleNode.start(options)
        : mode === 'sentinel'
          ? await SentinelSet.start(options)
          : await RedisClusterSet.start(options);
    config = loadConfig({ ...topology.env(), QUEUE_PREFIX: prefix });
    connections = new RedisConnections(config, logger);
    expect(await connections.whenAllReady(15_000)).toBe(true);
  }, 120_000);

  afterAll(async () => {
    await connections?.close(5_000);
    await topology?.stop();
  });

  const expectedNode = async (): Promise<string> => {
    if (topology instanceof SingleNode) return `127.0.0.1:${topology.port}`;
    if (topology instanceof SentinelSet) return `127.0.0.1:${await topology.primaryPort()}`;
    return `127.0.0.1:${await topology.primaryPortOf(probeKey(prefix))}`;
  };

  it('readiness names the mode and the node that took its write', async () => {
    expect(config.redisUrl.startsWith('rediss://')).toBe(true);
    expect(await connections.check()).toEqual({ mode, node: await expectedNode() });
  });

  it("carries jobs through BullMQ's queue and worker", async () => {
    const queue = new Queue(QUEUES.runs, { connection: connections.open('durable'), prefix });
    const done: string[] = [];
    const worker = new Worker(QUEUES.runs, async (job) => void done.push(job.name), {
      connection: connections.open('durable'),
      prefix,
    });
    try {
      await queue.addBulk([1, 2, 3].map((index) => ({ name: `job-${index}`, data: { index } })));
      await eventually(async () => (done.length === 3 ? true : undefined), 20_000, 50);
      expect(done.sort()).toEqual(['job-1', 'job-2', 'job-3']);
      expect(await queue.getCompletedCount()).toBe(3);
    } finally {
      await worker.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  }, 30_000);

  it('counts rate limits in Redis', async () => {
    const limiter = createRateLimiter(connections.commands, prefix, 2);
    await limiter.consume('token:a');
    await limiter.consume('token:a');
    await expect(limiter.consume('token:a')).rejects.toBeInstanceOf(RateLimiterRes);
    // In Redis, not in the in-memory insurance: the key is there.
    expect(await connections.commands.exists(`${prefix}:ratelimit:token:a`)).toBe(1);
  });

  it("start-up's probe passes, and refuses a wrong password and an unchecked certificate at once", async () => {
    await pingRedis(config);
    const wrong = loadConfig({ ...topology.env(), QUEUE_PREFIX: prefix, REDIS_URL: config.redisUrl.replace(PASSWORD, 'wrong-password') });
    await expect(pingRedis(wrong)).rejects.toThrow(/WRONGPASS/);
    const { REDIS_TLS_CA: _ca, ...withoutCa } = topology.env();
    await expect(pingRedis(loadConfig({ ...withoutCa, QUEUE_PREFIX: prefix }))).rejects.toThrow();
  }, 30_000);
});

/** A process started with `env`; resolves with its exit code and what it printed on stderr. */
function runProcess(script: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], {
      env: { PATH: process.env['PATH'] ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

describe('a cluster with a queue prefix that has no {hash-tag}', () => {
  it.each([
    ['a worker', '../../services/worker/src/main.ts', []],
    ['an API', '../../services/api/src/main.ts', ['--role', 'api']],
  ])(
    '%s refuses to start, saying why in one line',
    async (_name, script, args) => {
      const { code, stderr } = await runProcess(new URL(script, import.meta.url).pathname, args, {
        REDIS_CLUSTER_NODES: '127.0.0.1:7000',
        QUEUE_PREFIX: 'runtasks',
        STARTUP_TIMEOUT_SECONDS: '0',
      });
      expect(code).toBe(1);
      const why = stderr.split('\n').filter((line) => line.includes('QUEUE_PREFIX=runtasks has no {hash-tag}'));
      expect(why).toHaveLength(1);
      expect(why[0]).toContain('set e.g. QUEUE_PREFIX={runtasks}');
    },
    30_000,
  );
});
