/**
 * `npm run bench:large-files`: what near-limit archives and plans cost the API process (issue 43). One
 * API process with the defaults (rate limiting on, downloads bounded per token and in all, slow bodies
 * cut) on the benchmark's database; organization A holds a near-limit configuration archive (random,
 * incompressible bytes in a valid .tar.gz) and a near-limit plan JSON reported through a local run,
 * organization B only lists its workspaces. From this process, over loopback:
 *
 * 1. B's list alone (one request every 50 ms, under the rate limit), then beside 16 download lanes of A
 *    (8 of the archive, 8 of the plan, each downloading again as soon as one ends; a 429 past
 *    DOWNLOADS_PER_TOKEN or DOWNLOADS_TOTAL is the design: counted, and its Retry-After honoured): B's
 *    p50 and p99 with and without them, the downloads' statuses and bytes, and the API's RSS before,
 *    at its peak and after, and its rise beside the downloads (from where it stood as they began);
 * 2. 40 uploads of the near-limit archive with their last KiB withheld, held until the API cuts them
 *    (UPLOAD_MIN_BYTES_PER_SECOND over UPLOAD_RATE_WINDOW_SECONDS) or the phase ends: how each ended,
 *    and the API's RSS before, at its peak and after.
 *
 * The limits are the defaults (50 MiB); `--quick` sets CONFIGURATION_VERSION_MAX_BYTES and
 * PLAN_JSON_MAX_BYTES to 8 MiB and shortens phase 1, `--max-mib=N` sets both to N MiB, and
 * `--api-env=KEY=VALUE` gives the API process another setting (`DATABASE_POOL_SIZE=30`). Each phase
 * lasts at most 60 s. Prints a Markdown table and writes bench/results/large-files-<time>.json.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { request } from 'undici';
import { ADMIN_TOKEN, log, RESULTS_DIR, sleep } from './lib/env.ts';
import { createOrg, createWorkspace, type Org } from './lib/seed.ts';
import { freshDatabase, Stack } from './lib/stack.ts';
import { percentile, sortedCopy } from './lib/stats.ts';

const MIB = 1024 * 1024;
const quick = process.argv.includes('--quick');
const maxMib = Number(/^--max-mib=(\d+)$/.exec(process.argv.find((arg) => arg.startsWith('--max-mib=')) ?? '')?.[1] ?? (quick ? 8 : 50));
const MAX_BYTES = maxMib * MIB;
/** `--api-env=KEY=VALUE` (repeatable): a setting of the API process other than the defaults, to tell causes apart. */
const apiEnv = Object.fromEntries(
  process.argv.flatMap((arg) => {
    const setting = /^--api-env=([A-Z0-9_]+)=(.*)$/.exec(arg);
    return setting ? [[setting[1] as string, setting[2] as string]] : [];
  }),
);
/**
 * `--probe`: loads bench/lib/api-probe.ts into the API process and reports, per part of phase 1, where
 * its time went (event-loop delay, pool waits, Redis round trips, time inside the server, unsent bytes),
 * and this process's own event-loop delay (the client's: B's latency is measured here).
 */
const probing = process.argv.includes('--probe');
const PROBE_FILE = join(tmpdir(), `runtasks-bench-probe-${process.pid}.jsonl`);
if (probing) {
  rmSync(PROBE_FILE, { force: true });
  process.env['BENCH_NODE_FLAGS'] = `${process.env['BENCH_NODE_FLAGS'] ?? ''} --import ${join(import.meta.dirname, 'lib', 'api-probe.ts')}`;
}

/** The probe's figures since its last dump (SIGUSR2 to the API), once it wrote them; undefined without `--probe`. */
async function probe(pid: number): Promise<Record<string, unknown> | undefined> {
  if (!probing) return undefined;
  const lines = (): string[] => {
    try {
      return readFileSync(PROBE_FILE, 'utf8')
        .split('\n')
        .filter((line) => line.length > 0);
    } catch {
      return [];
    }
  };
  const before = lines().length;
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 10_000;
  while (lines().length === before) {
    if (Date.now() > deadline) throw new Error('the API probe wrote nothing in 10 s');
    await sleep(20);
  }
  return JSON.parse(lines().at(-1) ?? '{}') as Record<string, unknown>;
}

/** This process's event-loop delay while `work` runs, in ms (p50, p99, max). */
async function withLoopDelay<T>(work: () => Promise<T>): Promise<{ result: T; clientLoopMs: { p50: number; p99: number; max: number } }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  try {
    const result = await work();
    return { result, clientLoopMs: { p50: histogram.percentile(50) / 1e6, p99: histogram.percentile(99) / 1e6, max: histogram.max / 1e6 } };
  } finally {
    histogram.disable();
  }
}

/** Seconds of B's list alone, and beside the downloads (phase 1 is both, at most 60 s). */
const ALONE_SECONDS = quick ? 10 : 20;
const DOWNLOAD_SECONDS = quick ? 20 : 40;
/**
 * How long the stalled uploads are held at most. With the default window (30 s) a body that arrived
 * almost whole in its first window is cut at the end of its second, about 60 s in: past the phase's 60 s.
 */
const STALL_SECONDS = 58;
/** The stalled uploads start this many ms apart: 20 a second, under the rate limit of their one address. */
const STALL_SPACING_MS = 50;
const DOWNLOAD_LANES = 16;
const STALLED_UPLOADS = 40;
/** B's pace: one list every this many ms (20 a second, under the default RATE_LIMIT_PER_SECOND of 30). */
const PACE_MS = 50;
const WITHHELD_BYTES = 1024;

const count = (statuses: Record<string, number>, key: string | number): void => {
  statuses[String(key)] = (statuses[String(key)] ?? 0) + 1;
};

/** The resident set of process `pid`, in MiB (VmRSS of /proc/<pid>/status). */
function rssMiB(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib ?? Number.NaN) / 1024;
}

interface RssFigures {
  before: number;
  peak: number;
  after: number;
}

/** The CPU time process `pid` has used, user and system, in seconds (/proc/<pid>/stat, 100 ticks a second). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /s, '')
    .split(' ');
  // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** RSS of `pid` sampled every 100 ms while `work` runs; `after` once it settled for 2 s. */
async function withRss<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; rss: RssFigures }> {
  const before = rssMiB(pid);
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
  try {
    const result = await work();
    await sleep(2_000);
    const after = rssMiB(pid);
    return { result, rss: { before, peak: Math.max(peak, after), after } };
  } finally {
    clearInterval(timer);
  }
}

interface ListFigures {
  requests: number;
  statuses: Record<string, number>;
  p50: number;
  p99: number;
}

/** B lists its workspaces, paced, until `done()`. */
async function listing(baseUrl: string, org: Org, done: () => boolean): Promise<ListFigures> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  while (!done()) {
    const started = performance.now();
    const response = await request(`${baseUrl}/api/v2/organizations/${org.name}/workspaces`, {
      headers: { authorization: `Bearer ${org.token}` },
    });
    await response.body.arrayBuffer();
    const ms = performance.now() - started;
    latencies.push(ms);
    count(statuses, response.statusCode);
    if (ms < PACE_MS) await sleep(PACE_MS - ms);
  }
  const sorted = sortedCopy(latencies);
  return { requests: latencies.length, statuses, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

interface DownloadFigures {
  statuses: Record<string, number>;
  bytes: number;
}

/** One lane: downloads `path` again and again until `done()`; after a 429, waits its Retry-After. */
async function downloadLane(baseUrl: string, path: string, token: string, done: () => boolean, into: DownloadFigures): Promise<void> {
  while (!done()) {
    try {
      const response = await request(`${baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
      let bytes = 0;
      for await (const chunk of response.body) bytes += (chunk as Buffer).length;
      into.bytes += bytes;
      count(into.statuses, response.statusCode);
      if (response.statusCode === 429) await sleep(Number(response.headers['retry-after'] ?? 1) * 1000);
    } catch (error) {
      count(into.statuses, (error as Error).name);
    }
  }
}

/** A .tar.gz of about `bytes`: random bytes in one file, so that compressing cannot shrink it. */
function incompressibleArchive(bytes: number): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'runtasks-bench-large-'));
  try {
    writeFileSync(join(dir, 'main.tf'), 'terraform {}\n');
    writeFileSync(join(dir, 'blob.bin'), randomBytes(bytes));
    return execFileSync('tar', ['-czf', '-', '-C', dir, 'main.tf', 'blob.bin'], { maxBuffer: 2 * bytes + MIB });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A plan document of about `bytes`: no changes, and random base64 padding (compresses little). */
function paddedPlan(bytes: number): Buffer {
  const padding = randomBytes(Math.floor((bytes * 3) / 4)).toString('base64');
  return Buffer.from(JSON.stringify({ format_version: '1.2', terraform_version: '1.9.0', padding, resource_changes: [] }));
}

async function newUploadUrl(stack: Stack, org: Org, workspaceId: string): Promise<{ id: string; url: string }> {
  const created = await stack.expect(
    'POST',
    `/workspaces/${workspaceId}/configuration-versions`,
    org.token,
    { data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } } },
    201,
  );
  return { id: created.body.data?.id ?? '', url: String(created.body.data?.attributes?.['upload-url']) };
}

/** `answered <status>` (a 408: cut for its rate), `closed without an answer`, or `still open at the end`. */
type StallOutcome = string;

/** Sends the archive to `url` but its last bytes, and waits until the server answers or closes, or `deadline`. */
function stalledUpload(url: string, archive: Buffer, deadline: number): Promise<StallOutcome> {
  const target = new URL(url);
  return new Promise((resolve) => {
    let answer = '';
    let settled = false;
    const end = (outcome: StallOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(outcome);
    };
    const socket: Socket = connect(Number(target.port), target.hostname, () => {
      socket.write(
        `PUT ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nContent-Type: application/octet-stream\r\nContent-Length: ${archive.length}\r\n\r\n`,
      );
      socket.write(archive.subarray(0, archive.length - WITHHELD_BYTES));
    });
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1];
      end(status ? `answered ${status}` : 'closed without an answer');
    });
    const timer = setTimeout(() => end('still open at the end'), Math.max(0, deadline - Date.now()));
  });
}

await freshDatabase();
const stack = await Stack.start({
  workers: 0,
  apiOnly: true,
  // The defaults but the limits (serviceEnv turns rate limiting off; back on at its default of 30 a second).
  extraEnv: {
    RATE_LIMIT_PER_SECOND: '30',
    CONFIGURATION_VERSION_MAX_BYTES: String(MAX_BYTES),
    PLAN_JSON_MAX_BYTES: String(MAX_BYTES),
    ...apiEnv,
    ...(probing ? { BENCH_PROBE_FILE: PROBE_FILE } : {}),
  },
});
try {
  const apiPid = stack.api?.pid ?? 0;
  const a = await createOrg(stack, 'bench-large-a');
  const b = await createOrg(stack, 'bench-large-b');
  for (let index = 0; index < 20; index += 1) await createWorkspace(stack, b, `bench-large-b-ws-${index}`);
  const workspace = await stack.expect(
    'POST',
    `/organizations/${a.name}/workspaces`,
    a.token,
    { data: { type: 'workspaces', attributes: { name: 'bench-large-a-ws', 'execution-mode': 'local' } } },
    201,
  );
  const workspaceId = workspace.body.data?.id ?? '';

  // Near the limit, with room for tar's headers and gzip's framing of stored blocks.
  const archive = incompressibleArchive(Math.floor(MAX_BYTES * 0.99));
  const version = await newUploadUrl(stack, a, workspaceId);
  const uploaded = await request(version.url, { method: 'PUT', body: archive, headers: { 'content-type': 'application/octet-stream' } });
  await uploaded.body.dump();
  if (uploaded.statusCode !== 200) throw new Error(`uploading the archive: ${uploaded.statusCode}`);
  log(`archive of ${(archive.length / MIB).toFixed(2)} MiB uploaded (limit ${maxMib} MiB)`);

  const run = await stack.expect(
    'POST',
    '/runs',
    a.token,
    { data: { type: 'runs', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } } },
    201,
  );
  const runId = run.body.data?.id ?? '';
  // The run at planning, as the worker leaves a local run for its pipeline (no worker runs here).
  await stack.db.query(
    `update runs set status = 'planning', status_timestamps = status_timestamps || jsonb_build_object('planning-at', now()), version = version + 1 where id = $1`,
    [runId],
  );
  const plan = paddedPlan(Math.floor(MAX_BYTES * 0.99));
  const reported = await request(`${stack.baseUrl}/api/v2/runs/${runId}/plan/json-output`, {
    method: 'PUT',
    body: plan,
    headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
  });
  const reportedText = await reported.body.text();
  if (reported.statusCode !== 200) throw new Error(`reporting the plan: ${reported.statusCode} ${reportedText.slice(0, 300)}`);
  log(`plan of ${(plan.length / MIB).toFixed(2)} MiB reported`);

  // Phase 1: B's list alone, then beside 16 download lanes.
  let warmUp = 20;
  await listing(stack.baseUrl, b, () => warmUp-- <= 0);
  await probe(apiPid);
  const phase1 = await withRss(apiPid, async () => {
    let until = Date.now() + ALONE_SECONDS * 1000;
    const aloneMeasured = await withLoopDelay(() => listing(stack.baseUrl, b, () => Date.now() >= until));
    const alone = { ...aloneMeasured.result, clientLoopMs: aloneMeasured.clientLoopMs, api: await probe(apiPid) };
    until = Date.now() + DOWNLOAD_SECONDS * 1000;
    const done = (): boolean => Date.now() >= until;
    const cpuBefore = cpuSeconds(apiPid);
    const archives: DownloadFigures = { statuses: {}, bytes: 0 };
    const plans: DownloadFigures = { statuses: {}, bytes: 0 };
    // Half the lanes with A's token, half with the admin token: both bounds, per token and in all, are reached.
    const lanes = Array.from({ length: DOWNLOAD_LANES }, (_, lane) => {
      const token = lane % 4 < 2 ? a.token : ADMIN_TOKEN;
      return lane % 2 === 0
        ? downloadLane(stack.baseUrl, `/api/v2/configuration-versions/${version.id}/download`, token, done, archives)
        : downloadLane(stack.baseUrl, `/api/v2/runs/${runId}/plan/json-output`, token, done, plans);
    });
    // What the downloads themselves add, from where the RSS stood as they began: B's part alone before them
    // can already move it (the setup's near-limit archive and plan, collected late).
    const besideDownloads = { start: rssMiB(apiPid), peak: 0 };
    besideDownloads.peak = besideDownloads.start;
    const sampler = setInterval(() => (besideDownloads.peak = Math.max(besideDownloads.peak, rssMiB(apiPid))), 100);
    const duringMeasured = await withLoopDelay(() => Promise.all([listing(stack.baseUrl, b, done), ...lanes])).finally(() =>
      clearInterval(sampler),
    );
    const during = { ...duringMeasured.result[0], clientLoopMs: duringMeasured.clientLoopMs, api: await probe(apiPid) };
    // What the downloads cost the API's CPU, whatever else loads the machine: per MiB served.
    const apiCpuSeconds = cpuSeconds(apiPid) - cpuBefore;
    return { alone, during, archives, plans, apiCpuSeconds, rssBesideDownloadsMiB: besideDownloads };
  });
  log(`phase 1: list p99 ${phase1.result.alone.p99.toFixed(1)} ms alone, ${phase1.result.during.p99.toFixed(1)} ms beside the downloads`);

  // Phase 2: 40 uploads of the archive, stalled before their last KiB.
  const urls: string[] = [];
  // Paced under the rate limit of A's token (which the download lanes just used).
  await sleep(1_000);
  for (let index = 0; index < STALLED_UPLOADS; index += 1) {
    urls.push((await newUploadUrl(stack, a, workspaceId)).url);
    await sleep(STALL_SPACING_MS);
  }
  const phase2 = await withRss(apiPid, async () => {
    const started = Date.now();
    const deadline = started + STALL_SECONDS * 1000;
    const outcomes: Record<string, number> = {};
    await Promise.all(
      urls.map(async (url, index) => {
        await sleep(index * STALL_SPACING_MS);
        count(outcomes, await stalledUpload(url, archive, deadline));
      }),
    );
    return { outcomes, seconds: (Date.now() - started) / 1000 };
  });
  log(`phase 2: ${JSON.stringify(phase2.result.outcomes)} in ${phase2.result.seconds.toFixed(1)} s`);

  const results = {
    at: new Date().toISOString(),
    quick,
    loadAverage: loadavg(),
    cores: cpus().length,
    limitBytes: MAX_BYTES,
    apiEnv,
    // A profiler (--cpu-prof) adds its own memory to the RSS figures.
    nodeFlags: process.env['BENCH_NODE_FLAGS'] ?? '',
    archiveBytes: archive.length,
    planBytes: plan.length,
    phase1: { ...phase1.result, aloneSeconds: ALONE_SECONDS, downloadSeconds: DOWNLOAD_SECONDS, lanes: DOWNLOAD_LANES, rssMiB: phase1.rss },
    phase2: { ...phase2.result, uploads: STALLED_UPLOADS, withheldBytes: WITHHELD_BYTES, rssMiB: phase2.rss },
  };
  const f = (value: number): string => value.toFixed(1);
  const rss = (figures: RssFigures): string =>
    `${f(figures.before)} / ${f(figures.peak)} / ${f(figures.after)} (peak +${f(figures.peak - figures.before)})`;
  const { alone, during, archives, plans, apiCpuSeconds, rssBesideDownloadsMiB: beside } = phase1.result;
  const servedMiB = (archives.bytes + plans.bytes) / MIB;
  const table = [
    `Large files (${quick ? 'quick' : 'full'}; limits ${maxMib} MiB; archive ${f(archive.length / MIB)} MiB, plan ${f(plan.length / MIB)} MiB; load average ${results.loadAverage.map((n) => n.toFixed(1)).join(' ')} on ${results.cores} cores${Object.keys(apiEnv).length > 0 ? `; API with ${JSON.stringify(apiEnv)}` : ''})`,
    '',
    '| | figures |',
    '| --- | --- |',
    `| B's list alone: requests, statuses, p50 / p99 | ${alone.requests}, ${JSON.stringify(alone.statuses)}, ${f(alone.p50)} / ${f(alone.p99)} ms |`,
    `| B's list beside ${DOWNLOAD_LANES} download lanes: requests, statuses, p50 / p99 | ${during.requests}, ${JSON.stringify(during.statuses)}, ${f(during.p50)} / ${f(during.p99)} ms |`,
    `| archive downloads (${DOWNLOAD_SECONDS} s): statuses, MiB | ${JSON.stringify(archives.statuses)}, ${f(archives.bytes / MIB)} |`,
    `| plan downloads (${DOWNLOAD_SECONDS} s): statuses, MiB | ${JSON.stringify(plans.statuses)}, ${f(plans.bytes / MIB)} |`,
    `| API CPU beside the downloads: seconds, ms per MiB served | ${f(apiCpuSeconds)}, ${f((apiCpuSeconds * 1000) / Math.max(servedMiB, 1))} |`,
    `| API RSS, phase 1: before / peak / after, MiB | ${rss(phase1.rss)} |`,
    `| API RSS beside the downloads: at their start / peak, MiB | ${f(beside.start)} / ${f(beside.peak)} (peak +${f(beside.peak - beside.start)}) |`,
    `| ${STALLED_UPLOADS} stalled uploads (${f(phase2.result.seconds)} s): outcomes | ${JSON.stringify(phase2.result.outcomes)} |`,
    `| API RSS, phase 2: before / peak / after, MiB | ${rss(phase2.rss)} |`,
  ].join('\n');
  process.stdout.write(`${table}\n`);
  if (probing)
    process.stdout.write(
      `${JSON.stringify({ alone: { client: alone.clientLoopMs, api: alone.api }, during: { client: during.clientLoopMs, api: during.api } }, null, 1)}\n`,
    );
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(`${RESULTS_DIR}/large-files-${results.at.replace(/[:.]/g, '-')}.json`, `${JSON.stringify(results, null, 2)}\n`);
} finally {
  await stack.stop();
}
