/**
 * The component baseline's client, a process of its own driven over IPC: one-row insert
 * transactions (pg), BullMQ no-op jobs (add + process, the project's BullMQ and ioredis), and
 * undici request pairs to the benchmark task server (a signed POST it verifies and answers 200).
 * Every loop is bounded by a count or a duration.
 */
import { Queue, Worker } from 'bullmq';
import { createHmac } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Agent, request } from 'undici';
import { DATABASE_URL, HMAC_KEY, newQueuePrefix, REDIS_URL } from './lib/env.ts';
import { serveIpc } from './lib/ipc.ts';
import { percentile, sortedCopy } from './lib/stats.ts';

function summary(latencies: number[], elapsedMs: number) {
  const sorted = sortedCopy(latencies);
  return {
    ops: latencies.length,
    elapsedMs,
    perSecond: (latencies.length / elapsedMs) * 1000,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  };
}

/** A row shaped like a task result (text ids, status, message, url, attempts, timestamps, a ~200-byte jsonb). */
const INSERT = `insert into bench_component (run_id, status, message, url, attempts, payload) values ($1, 'pending', $2, $3, 0, $4::jsonb)`;
const PAYLOAD = JSON.stringify({
  stage: 'post_plan',
  enforcement: 'mandatory',
  task: 'task-0123456789abcdef',
  url: 'https://tasks.example.test/hook',
  note: 'x'.repeat(80),
});

async function pgInsert(message: { seconds: number; concurrency: number }) {
  const clients = await Promise.all(
    Array.from({ length: message.concurrency }, async () => {
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      return client;
    }),
  );
  const latencies: number[] = [];
  const deadline = performance.now() + message.seconds * 1000;
  const started = performance.now();
  try {
    await Promise.all(
      clients.map(async (client, index) => {
        let n = 0;
        while (performance.now() < deadline) {
          const t = performance.now();
          await client.query(INSERT, [`run-${index}-${n++}`, 'benchmark', 'https://tasks.example.test/results/1', PAYLOAD]);
          latencies.push(performance.now() - t);
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((client) => client.end()));
  }
  return summary(latencies, performance.now() - started);
}

interface BullSetup {
  queue: Queue;
  worker: Worker;
  connections: Redis[];
  prefix: string;
}

const RETENTION = { removeOnComplete: { age: 86_400, count: 1000 }, removeOnFail: { age: 7 * 86_400 } };

function bull(processor: (data: { n: number }) => void, concurrency: number): BullSetup {
  const prefix = newQueuePrefix();
  const connections = [new Redis(REDIS_URL, { maxRetriesPerRequest: null }), new Redis(REDIS_URL, { maxRetriesPerRequest: null })];
  const queue = new Queue('components', { connection: connections[0] as Redis, prefix });
  const worker = new Worker('components', async (job) => processor(job.data as { n: number }), {
    connection: connections[1] as Redis,
    prefix,
    concurrency,
  });
  return { queue, worker, connections, prefix };
}

async function closeBull(setup: BullSetup): Promise<void> {
  await setup.worker.close();
  await setup.queue.obliterate({ force: true }).catch(() => undefined);
  await setup.queue.close();
  for (const connection of setup.connections) connection.disconnect();
}

/** `jobs` no-op jobs added one by one (16 adds in flight) while a worker with concurrency 16 processes them. */
async function bullThroughput(message: { jobs: number }) {
  let done = 0;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const setup = bull(() => {
    done += 1;
    if (done === message.jobs) finish();
  }, 16);
  await setup.worker.waitUntilReady();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < message.jobs) {
        const n = next++;
        await setup.queue.add('noop', { n }, RETENTION);
      }
    }),
  );
  await finished;
  const elapsedMs = performance.now() - started;
  await closeBull(setup);
  return { ops: message.jobs, elapsedMs, perSecond: (message.jobs / elapsedMs) * 1000 };
}

/** Low load: one job at a time, from `queue.add` to the processor starting. */
async function bullLatency(message: { jobs: number }) {
  const waiting = new Map<number, (at: number) => void>();
  const setup = bull(({ n }) => waiting.get(n)?.(performance.now()), 16);
  await setup.worker.waitUntilReady();
  const latencies: number[] = [];
  for (let n = 0; n < message.jobs + 20; n += 1) {
    const started = performance.now();
    const startedProcessing = new Promise<number>((resolve) => waiting.set(n, resolve));
    await setup.queue.add('noop', { n }, RETENTION);
    const at = await startedProcessing;
    if (n >= 20) latencies.push(at - started);
    waiting.delete(n);
  }
  await closeBull(setup);
  return summary(latencies, 0);
}

const agent = new Agent({ connections: 128, pipelining: 1 });

/** A verification-shaped payload padded to ~1.3 KB (the size of a task request), signed as the service signs. */
function signedBody(): { body: string; signature: string } {
  const body = JSON.stringify({
    payload_version: 1,
    access_token: 'test-token',
    stage: 'test',
    is_speculative: false,
    padding: 'p'.repeat(1100),
  });
  return { body, signature: createHmac('sha512', HMAC_KEY).update(body).digest('hex') };
}

async function post(url: string, body: string, signature: string): Promise<number> {
  const response = await request(url, {
    method: 'POST',
    dispatcher: agent,
    body,
    headers: { 'content-type': 'application/json', 'x-tfc-task-signature': signature },
  });
  await response.body.dump();
  return response.statusCode;
}

async function httpPairs(message: { url: string; seconds: number; inflight: number }) {
  const { body } = signedBody();
  const latencies: number[] = [];
  let failures = 0;
  const deadline = performance.now() + message.seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: message.inflight }, async () => {
      while (performance.now() < deadline) {
        const t = performance.now();
        // The signature is computed per request, as the dispatcher does.
        const status = await post(message.url, body, createHmac('sha512', HMAC_KEY).update(body).digest('hex'));
        latencies.push(performance.now() - t);
        if (status !== 200) failures += 1;
      }
    }),
  );
  return { ...summary(latencies, performance.now() - started), failures };
}

async function httpSequential(message: { url: string; requests: number }) {
  const { body, signature } = signedBody();
  const latencies: number[] = [];
  for (let n = 0; n < message.requests + 50; n += 1) {
    const t = performance.now();
    await post(message.url, body, signature);
    if (n >= 50) latencies.push(performance.now() - t);
  }
  return summary(latencies, 0);
}

serveIpc({
  pgInsert: (message) => pgInsert(message as unknown as { seconds: number; concurrency: number }),
  bullThroughput: (message) => bullThroughput(message as unknown as { jobs: number }),
  bullLatency: (message) => bullLatency(message as unknown as { jobs: number }),
  httpPairs: (message) => httpPairs(message as unknown as { url: string; seconds: number; inflight: number }),
  httpSequential: (message) => httpSequential(message as unknown as { url: string; requests: number }),
  close: async () => {
    await agent.close();
    return true;
  },
});
process.send?.({ ready: true });
process.on('SIGTERM', () => process.exit(0));
