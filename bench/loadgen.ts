/**
 * The load generator: a process of its own (so its CPU is measured apart), driven by the harness
 * over IPC. Every loop is bounded by a count or a duration.
 *
 * - `burst`: a closed loop of `concurrency` clients creating `runs` runs (POST /api/v2/runs).
 * - `open`: runs created at a fixed rate for `seconds`, each timed from its scheduled send time.
 * - `get`: `concurrency` clients GETting random paths from a list for `seconds`.
 */
import { Pool } from 'undici';
import { epochMs } from './lib/env.ts';
import { serveIpc } from './lib/ipc.ts';
import { percentile, sortedCopy } from './lib/stats.ts';

const MEDIA_TYPE = 'application/vnd.api+json';
const pools = new Map<string, Pool>();

function poolFor(baseUrl: string, connections: number): Pool {
  const key = `${baseUrl}#${connections}`;
  let pool = pools.get(key);
  if (!pool) {
    pool = new Pool(baseUrl, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
    pools.set(key, pool);
  }
  return pool;
}

const runBody = (workspaceId: string): string =>
  JSON.stringify({
    data: {
      type: 'runs',
      attributes: { message: 'benchmark run', 'auto-apply': true },
      relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } },
    },
  });

async function createRun(pool: Pool, token: string, workspaceId: string): Promise<{ ok: boolean; id?: string; error?: string }> {
  try {
    const response = await pool.request({
      method: 'POST',
      path: '/api/v2/runs',
      body: runBody(workspaceId),
      headers: { 'content-type': MEDIA_TYPE, authorization: `Bearer ${token}` },
    });
    const text = await response.body.text();
    if (response.statusCode !== 201) return { ok: false, error: `${response.statusCode} ${text.slice(0, 300)}` };
    return { ok: true, id: (JSON.parse(text) as { data: { id: string } }).data.id };
  } catch (error) {
    return { ok: false, error: String(error) };
  }
}

interface Common {
  baseUrl: string;
  token: string;
  workspaces: string[];
}

async function burst(message: Common & { runs: number; concurrency: number }) {
  const pool = poolFor(message.baseUrl, message.concurrency);
  let next = 0;
  let created = 0;
  const errors: string[] = [];
  const latencies: number[] = [];
  const startedAt = epochMs();
  const client = async (): Promise<void> => {
    while (next < message.runs) {
      const index = next++;
      const started = performance.now();
      const outcome = await createRun(pool, message.token, message.workspaces[index % message.workspaces.length] as string);
      latencies.push(performance.now() - started);
      if (outcome.ok) created += 1;
      else if (errors.length < 5) errors.push(outcome.error ?? 'error');
      else errors.push('');
    }
  };
  await Promise.all(Array.from({ length: message.concurrency }, client));
  const sorted = sortedCopy(latencies);
  return {
    created,
    errors: errors.length,
    errorSamples: errors.filter(Boolean),
    startedAt,
    endedAt: epochMs(),
    createP50: percentile(sorted, 50),
    createP99: percentile(sorted, 99),
  };
}

async function openLoop(message: Common & { rate: number; seconds: number }) {
  const pool = poolFor(message.baseUrl, 32);
  const total = Math.round(message.rate * message.seconds);
  const interval = 1000 / message.rate;
  const runs: [string, number, number][] = [];
  const errors: string[] = [];
  const inFlight: Promise<void>[] = [];
  const start = epochMs() + 20;
  let maxLagMs = 0;
  for (let index = 0; index < total; index += 1) {
    const scheduledAt = start + index * interval;
    const wait = scheduledAt - epochMs();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    maxLagMs = Math.max(maxLagMs, epochMs() - scheduledAt);
    inFlight.push(
      createRun(pool, message.token, message.workspaces[index % message.workspaces.length] as string).then((outcome) => {
        if (outcome.ok && outcome.id) runs.push([outcome.id, scheduledAt, epochMs()]);
        else errors.push(outcome.error ?? 'error');
      }),
    );
  }
  await Promise.all(inFlight);
  return { runs, errors: errors.length, errorSamples: errors.slice(0, 5), maxLagMs };
}

async function getLoop(message: { baseUrl: string; token: string; paths: string[]; concurrency: number; seconds: number }) {
  const pool = poolFor(message.baseUrl, message.concurrency);
  const deadline = performance.now() + message.seconds * 1000;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let bytes = 0;
  let errors = 0;
  const errorSamples: string[] = [];
  const headers = { authorization: `Bearer ${message.token}`, accept: MEDIA_TYPE };
  const client = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const path = message.paths[Math.floor(Math.random() * message.paths.length)] as string;
      const started = performance.now();
      try {
        const response = await pool.request({ method: 'GET', path, headers });
        const body = await response.body.arrayBuffer();
        latencies.push(performance.now() - started);
        bytes += body.byteLength;
        statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
        if (response.statusCode !== 200 && errorSamples.length < 3)
          errorSamples.push(`${path}: ${Buffer.from(body).toString('utf8').slice(0, 300)}`);
      } catch (error) {
        errors += 1;
        if (errorSamples.length < 3) errorSamples.push(String(error));
      }
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: message.concurrency }, client));
  const elapsedMs = performance.now() - started;
  const sorted = sortedCopy(latencies);
  return {
    count: latencies.length,
    errors,
    errorSamples,
    statuses,
    elapsedMs,
    meanBytes: latencies.length ? bytes / latencies.length : 0,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: percentile(sorted, 100),
  };
}

serveIpc({
  burst: (message) => burst(message as unknown as Common & { runs: number; concurrency: number }),
  open: (message) => openLoop(message as unknown as Common & { rate: number; seconds: number }),
  get: (message) =>
    getLoop(message as unknown as { baseUrl: string; token: string; paths: string[]; concurrency: number; seconds: number }),
  close: async () => {
    await Promise.all([...pools.values()].map((pool) => pool.close()));
    pools.clear();
    return true;
  },
});
process.send?.({ ready: true });
process.on('SIGTERM', () => process.exit(0));
