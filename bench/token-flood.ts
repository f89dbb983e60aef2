/**
 * `npm run bench:token-flood`: what a legitimate client sees while its own address floods the API with
 * random tokens (issue 47). One API process with the defaults of authentication (AUTH_FAILURES_PER_MINUTE
 * 20, the principal cache on) on the benchmark's database; from this process, over loopback (one address):
 *
 * 1. the legitimate client alone: sequential requests with the admin token, paced, for its p50 and p99;
 * 2. the same client while 50,000 random well-formed tokens (`--quick`: 5,000) are sent beside it,
 *    `--concurrency=N` at a time (8 by default): its statuses (any 429 is a failure of the issue's
 *    guarantee), its p50 and p99 as ratios to step 1's, and the PostgreSQL transactions of the database
 *    in each step (pg_stat_database), the flood's share being step 2's less what step 1 cost per client
 *    request and per second (the heartbeat); and the API process's CPU per refused request (/proc), the
 *    cost a flood puts on the process, less the client's requests at step 1's cost each.
 *
 * `--flood-thread`: the flood's lanes run in a worker thread of this process rather than on the client's
 * event loop. Sharing one loop, the client's every response waits behind the flood's own fetches and token
 * draws (about as much work per request as the API's refusal), so its latency measures the load generator
 * as much as the API; an attacker beside a client at one address (NAT) is another program.
 *
 * The machine is shared and noisy: figures are ratios to what was measured in the same run, never
 * thresholds. Prints a Markdown table and writes bench/results/token-flood-<time>.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import pg from 'pg';
import { API_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { ADMIN_TOKEN, DATABASE_URL, log, RESULTS_DIR, sleep } from './lib/env.ts';
import { processTicks, TICK_MS } from './lib/cpu.ts';
import { freshDatabase, Stack } from './lib/stack.ts';
import { percentile, sortedCopy } from './lib/stats.ts';

const quick = process.argv.includes('--quick');
const floodThread = process.argv.includes('--flood-thread');
const FLOOD = quick ? 5_000 : 50_000;
const CONCURRENCY = Number(/^--concurrency=(\d+)$/.exec(process.argv.find((arg) => arg.startsWith('--concurrency=')) ?? '')?.[1] ?? 8);
/** The legitimate client's pace: one request every this many ms. */
const PACE_MS = 20;
const ALONE_REQUESTS = quick ? 200 : 1_000;

interface ClientFigures {
  requests: number;
  statuses: Record<string, number>;
  p50: number;
  p99: number;
}

async function status(baseUrl: string, token: string): Promise<number> {
  const res = await fetch(`${baseUrl}/api/v2/organizations`, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
}

/** The legitimate client: paced sequential requests until `done()`, or `count` of them. */
async function legitimate(baseUrl: string, until: { count?: number; done?: () => boolean }): Promise<ClientFigures> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  while ((until.count === undefined || latencies.length < until.count) && !(until.done?.() ?? false)) {
    const started = performance.now();
    const code = String(await status(baseUrl, ADMIN_TOKEN));
    const ms = performance.now() - started;
    latencies.push(ms);
    statuses[code] = (statuses[code] ?? 0) + 1;
    if (ms < PACE_MS) await sleep(PACE_MS - ms);
  }
  const sorted = sortedCopy(latencies);
  return { requests: latencies.length, statuses, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

async function flood(baseUrl: string, count: number): Promise<Record<string, number>> {
  const statuses: Record<string, number> = {};
  let sent = 0;
  const lane = async (): Promise<void> => {
    while (sent < count) {
      sent += 1;
      const code = String(await status(baseUrl, generateToken(API_TOKEN_PREFIX)));
      statuses[code] = (statuses[code] ?? 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return statuses;
}

/** The flood in a worker thread of this process (`--flood-thread`): its statuses once it is done. */
function floodInThread(baseUrl: string, count: number): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { baseUrl, count }, argv: process.argv.slice(2) });
    worker.once('message', (statuses: Record<string, number>) => {
      resolve(statuses);
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`flood thread exited with ${code}`))));
  });
}

if (!isMainThread) {
  const { baseUrl, count } = workerData as { baseUrl: string; count: number };
  parentPort?.postMessage(await flood(baseUrl, count));
  // Ended by the main thread once it has the statuses; the rest of this module is the main thread's alone.
  setInterval(() => undefined, 1 << 30);
  await new Promise<never>(() => undefined);
}

/** The database's transactions so far (after the statistics of the last second were flushed). */
async function transactions(db: pg.Client): Promise<number> {
  await sleep(1_500);
  const { rows } = await db.query<{ n: string }>(
    `select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()`,
  );
  return Number(rows[0]?.n ?? 0);
}

await freshDatabase();
const stack = await Stack.start({ workers: 0, apiOnly: true, extraEnv: { LOG_LEVEL: 'info' } });
const db = new pg.Client({ connectionString: DATABASE_URL, application_name: 'bench-token-flood' });
await db.connect();
try {
  // The admin token known, remembered, and its use recorded: what a client that has been working sees.
  await legitimate(stack.baseUrl, { count: 50 });

  const api = stack.processes.find((managed) => managed.role === 'api');
  /** The API process's CPU time so far, in ms (what a refusal costs is the lever; latency follows from it). */
  const apiCpuMs = (): number => (processTicks(api?.pid ?? 0) ?? 0) * TICK_MS;
  const aloneFrom = await transactions(db);
  const aloneCpuFrom = apiCpuMs();
  let started = performance.now();
  const alone = await legitimate(stack.baseUrl, { count: ALONE_REQUESTS });
  const aloneSeconds = (performance.now() - started) / 1000;
  const aloneCpuMs = apiCpuMs() - aloneCpuFrom;
  const aloneTx = (await transactions(db)) - aloneFrom - 1;
  log(`alone: ${alone.requests} requests in ${aloneSeconds.toFixed(1)} s, p99 ${alone.p99.toFixed(1)} ms, ${aloneTx} transactions`);

  const floodFrom = await transactions(db);
  const floodCpuFrom = apiCpuMs();
  started = performance.now();
  let flooding = true;
  const [floodStatuses, during] = await Promise.all([
    (floodThread ? floodInThread : flood)(stack.baseUrl, FLOOD).finally(() => (flooding = false)),
    legitimate(stack.baseUrl, { done: () => !flooding }),
  ]);
  const floodSeconds = (performance.now() - started) / 1000;
  // The API's CPU beside the flood, less what the client's own requests cost alone (about 1.5 s of
  // heartbeats and idle on either side are in both), per refused request.
  const floodCpuMs = apiCpuMs() - floodCpuFrom;
  const refusalCpuMs = Math.max(0, floodCpuMs - (aloneCpuMs / alone.requests) * during.requests) / FLOOD;
  const floodTx = (await transactions(db)) - floodFrom - 1;
  // The client's own requests read the database (its route lists organizations), and the process sends
  // its heartbeat (a transaction a second): what step 1 cost per request and per second, over step 2.
  const perRequest = Math.max(0, aloneTx - aloneSeconds) / alone.requests;
  const expected = perRequest * during.requests + floodSeconds;
  const results = {
    at: new Date().toISOString(),
    flood: { tokens: FLOOD, concurrency: CONCURRENCY, thread: floodThread, seconds: floodSeconds, statuses: floodStatuses },
    alone: { ...alone, seconds: aloneSeconds, transactions: aloneTx },
    during: { ...during, transactions: floodTx },
    ratios: { p50: during.p50 / alone.p50, p99: during.p99 / alone.p99 },
    floodTransactions: floodTx - expected,
    apiCpuMs: { alone: aloneCpuMs, perClientRequest: aloneCpuMs / alone.requests, flood: floodCpuMs, perRefusal: refusalCpuMs },
  };
  const table = [
    '| | requests | statuses | p50 ms | p99 ms | PG transactions | API CPU-ms |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| legitimate client alone | ${alone.requests} | ${JSON.stringify(alone.statuses)} | ${alone.p50.toFixed(1)} | ${alone.p99.toFixed(1)} | ${aloneTx} in ${aloneSeconds.toFixed(1)} s | ${results.apiCpuMs.perClientRequest.toFixed(3)} a request |`,
    `| legitimate client during the flood | ${during.requests} | ${JSON.stringify(during.statuses)} | ${during.p50.toFixed(1)} (×${results.ratios.p50.toFixed(2)}) | ${during.p99.toFixed(1)} (×${results.ratios.p99.toFixed(2)}) | ${floodTx} in ${floodSeconds.toFixed(1)} s (${expected.toFixed(0)} expected of the client and heartbeats) | ${floodCpuMs.toFixed(0)} in all |`,
    `| the flood (${FLOOD} random tokens, ${CONCURRENCY} at a time${floodThread ? ', in a worker thread' : ''}) | ${FLOOD} | ${JSON.stringify(floodStatuses)} | | | ≈ ${(floodTx - expected).toFixed(0)} | ${refusalCpuMs.toFixed(3)} a refusal |`,
  ].join('\n');
  process.stdout.write(`${table}\n`);
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(`${RESULTS_DIR}/token-flood-${results.at.replace(/[:.]/g, '-')}.json`, `${JSON.stringify(results, null, 2)}\n`);
} finally {
  await db.end();
  await stack.stop();
}
