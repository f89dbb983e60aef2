import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import pg from 'pg';
import { Redis } from 'ioredis';
import type { BaselineResult } from './baseline.ts';
import { cpuModel, ROLES } from './cpu.ts';
import { DATABASE_URL, REDIS_URL, RESULTS_DIR, ROOT, type Options } from './env.ts';
import { SEGMENTS, type LatencyResult, type LatencySample, type SegmentName } from './latency.ts';
import type { NotificationsResult } from './notifications-bench.ts';
import type { PipelineResult } from './pipeline.ts';
import { SHARED_PORT_APIS, SHARED_PORT_SUFFIX, type ReadResult, type ReadsOutput } from './reads.ts';
import { fitLine, fmt, fmtRange, range, type Range } from './stats.ts';

/**
 * Results: one JSON document with every sample, and a Markdown summary with the machine, versions,
 * the component baseline, each figure with its ratios, and the target verdicts.
 */

export interface Results {
  meta: Meta;
  baseline?: BaselineResult;
  h1?: PipelineResult[];
  /** H1's configurations on one Redis node and on a Redis Cluster, side by side (`bench:h1 -- --redis-cluster`). */
  h1Cluster?: { single: PipelineResult; cluster: PipelineResult }[];
  /** H1 with N notification configurations per workspace beside none, one stack, interleaved (`bench:h1 -- --notifications=N`). */
  h1Notifications?: NotificationsResult;
  h2?: LatencyResult;
  h3?: ReadResult[];
  h4?: { tasks: PipelineResult[]; workspaces?: { one: PipelineResult; many: PipelineResult }; list?: ReadsOutput['growth'] };
  /** The lean reference (bench/lean) measured in this run: H1's configurations (T = 3, and 1 and 10 with H4), H2 and H3's target reads. */
  lean?: { pipeline?: PipelineResult[]; latency?: LatencyResult; reads?: ReadResult[] };
}

export interface Meta {
  date: string;
  figures: string[];
  mode: 'full' | 'quick';
  durationSeconds: number;
  machine: { cpu: string; cores: number; memoryGiB: number; kernel: string };
  versions: { node: string; postgres: string; redis: string; bullmq: string; mikroOrm: string; koa: string; undici: string };
  commit: string;
  workingTreeChanges: number;
  rateLimiting: string;
  workerConcurrency: number;
}

function packageVersion(name: string): string {
  try {
    return (
      JSON.parse(
        execFileSync(process.execPath, ['-p', `JSON.stringify(require('${name}/package.json'))`], { cwd: ROOT, encoding: 'utf8' }),
      ) as { version: string }
    ).version;
  } catch {
    return 'unknown';
  }
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

export async function collectMeta(options: Options, figures: string[], startedAt: number): Promise<Meta> {
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  const postgres = (await db.query<{ server_version: string }>('show server_version')).rows[0]?.server_version ?? 'unknown';
  await db.end();
  const redis = new Redis(REDIS_URL);
  const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
  redis.disconnect();
  return {
    date: new Date().toISOString(),
    figures,
    mode: options.quick ? 'quick' : 'full',
    durationSeconds: Math.round((Date.now() - startedAt) / 1000),
    machine: {
      cpu: cpuModel(),
      cores: (await import('node:os')).availableParallelism(),
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      kernel: (await import('node:os')).release(),
    },
    versions: {
      node: process.version,
      postgres,
      redis: redisVersion,
      bullmq: packageVersion('bullmq'),
      mikroOrm: packageVersion('@mikro-orm/core'),
      koa: packageVersion('koa'),
      undici: packageVersion('undici'),
    },
    // Read-only git queries: which code was measured.
    commit: git(['rev-parse', '--short', 'HEAD']),
    workingTreeChanges: git(['status', '--porcelain']).split('\n').filter(Boolean).length,
    rateLimiting: 'off (RATE_LIMIT_PER_SECOND=0 in every API process)',
    workerConcurrency: 16,
  };
}

/**
 * The lean reference pipeline as first measured on another machine (Node 24 where given), from
 * which the targets were set (docs/benchmarks.md). bench/lean rebuilds it, so it is also measured in the run.
 */
export const LEAN = {
  runsPerSecond: 143,
  cpuMsPerRun: 13.2,
  slopeMs: 1.72,
  listPerSecond: 1787,
  pkRoutePerSecond: 6458,
  firstTaskP50: 5.9,
  firstTaskP99: 14.2,
};

/** Component floor of a run with S stages and T tasks per stage, from the baseline's unit costs. */
export function floorMsPerRun(baseline: BaselineResult, stages: number, tasks: number): number {
  const results = stages * tasks;
  return (
    (1 + 2 * results) * baseline.http.cpuMsPerOp.median +
    (1 + stages + 2 * results) * baseline.insert.cpuMsPerOp.median +
    (1 + stages) * baseline.job.cpuMsPerOp.median
  );
}

export const floorSlopeMs = (baseline: BaselineResult): number =>
  2 * baseline.http.cpuMsPerOp.median + 2 * baseline.insert.cpuMsPerOp.median;

export function floorLatency(baseline: BaselineResult): { p50: number; p99: number } {
  return {
    p50: 3 * baseline.insert.p50Ms.median + baseline.job.p50Ms.median + baseline.http.p50Ms.median,
    p99: 2 * baseline.insert.p99Ms.median + baseline.job.p99Ms.median + baseline.http.p99Ms.median,
  };
}

export interface Verdict {
  figure: string;
  target: string;
  measured: string;
  met: boolean;
  gap: string;
}

const atLeast = (figure: string, measured: number, target: number, unit: string, digits = 0): Verdict => ({
  figure,
  target: `≥ ${fmt(target, digits)} ${unit}`,
  measured: `${fmt(measured, digits === 0 ? 0 : digits)} ${unit}`,
  met: measured >= target,
  gap: measured >= target ? '' : `${fmt((100 * (target - measured)) / target, 0)} % short (×${fmt(target / measured, 1)} needed)`,
});

const atMost = (figure: string, measured: number, target: number, unit: string, digits = 1): Verdict => ({
  figure,
  target: `≤ ${fmt(target, digits)} ${unit}`,
  measured: `${fmt(measured, digits)} ${unit}`,
  met: measured <= target,
  gap: measured <= target ? '' : `${fmt((100 * (measured - target)) / target, 0)} % over (×${fmt(measured / target, 1)})`,
});

const ratioAtLeast = (figure: string, ratio: number, target: number): Verdict => ({
  ...atLeast(figure, ratio, target, '', 2),
  measured: fmt(ratio, 2),
});

const ratioAtMost = (figure: string, ratio: number, target: number): Verdict => ({
  ...atMost(figure, ratio, target, '', 2),
  measured: fmt(ratio, 2),
});

/** The lean reference's H1 result with T tasks per stage, when this run measured it. */
export const leanPipeline = (results: Results, tasks: number): PipelineResult | undefined =>
  results.lean?.pipeline?.find((result) => result.config.tasks === tasks);

export function slopeOf(tasks: readonly PipelineResult[]): { a: number; b: number } | undefined {
  if (tasks.length < 2) return undefined;
  return fitLine(tasks.map((result) => ({ x: 2 * result.config.tasks, y: result.cpuMsPerRun.median })));
}

/** The slope of each process's CPU-ms per run, and of the WAL's KB per run, over S·T (see slopeOf). */
function slopesByPart(tasks: readonly PipelineResult[]): Map<string, number> | undefined {
  if (tasks.length < 2) return undefined;
  const slopes = new Map<string, number>();
  const roles = Object.keys(tasks[0]?.cpuMsPerRunByRole ?? {}) as (keyof PipelineResult['cpuMsPerRunByRole'])[];
  for (const role of roles)
    slopes.set(role, fitLine(tasks.map((result) => ({ x: 2 * result.config.tasks, y: result.cpuMsPerRunByRole[role] }))).b);
  slopes.set('WAL KB', fitLine(tasks.map((result) => ({ x: 2 * result.config.tasks, y: result.walBytesPerRun / 1024 }))).b);
  return slopes;
}

/** "api 0.28 (lean 0.20), worker …": where an extra task result's cost goes, process by process. */
function slopesLine(tasks: readonly PipelineResult[], lean: readonly PipelineResult[] | undefined): string | undefined {
  const ours = slopesByPart(tasks);
  if (!ours) return undefined;
  const theirs = lean && lean.length >= 3 ? slopesByPart(lean) : undefined;
  const parts = [...ours]
    .filter(([part]) => part !== 'postgres-bg' && part !== 'loadgen')
    .map(([part, slope]) => {
      const leanSlope = theirs?.get(part);
      return `${part} ${fmt(slope, 2)}${leanSlope === undefined ? '' : ` (lean ${fmt(leanSlope, 2)})`}`;
    });
  return `- Where an extra task result's cost goes (slope of each part per run over the same T, CPU-ms; WAL in KB): ${parts.join(', ')}.`;
}

export function verdicts(results: Results): Verdict[] {
  const out: Verdict[] = [];
  const t3 = (results.h1 ?? []).filter((result) => result.config.tasks === 3 && result.config.workspaces === 1);
  if (t3.length > 0) {
    const fastest = t3.reduce((best, result) => (result.runsPerSecond.median > best.runsPerSecond.median ? result : best));
    const cheapest = t3.reduce((best, result) => (result.cpuMsPerRun.median < best.cpuMsPerRun.median ? result : best));
    out.push(
      atLeast(
        `H1 runs/s, 2×3 (best: ${fastest.config.workers} worker${fastest.config.workers > 1 ? 's' : ''})`,
        fastest.runsPerSecond.median,
        140,
        'runs/s',
      ),
    );
    out.push(
      atMost(
        `H1 CPU-ms per run, 2×3 (best: ${cheapest.config.workers} worker${cheapest.config.workers > 1 ? 's' : ''})`,
        cheapest.cpuMsPerRun.median,
        14,
        'ms',
      ),
    );
  }
  const lean3 = leanPipeline(results, 3);
  if (t3.length > 0 && lean3) {
    const one = t3.find((result) => result.config.workers === 1) ?? t3[0];
    if (one) {
      out.push(
        ratioAtLeast(
          'H1 runs/s ÷ lean reference in this run, 2×3, 1 worker (140 of its 143 where the targets were set)',
          one.runsPerSecond.median / lean3.runsPerSecond.median,
          140 / LEAN.runsPerSecond,
        ),
      );
      out.push(
        ratioAtMost(
          'H1 CPU-ms per run ÷ lean reference in this run (14 of its 13.2)',
          one.cpuMsPerRun.median / lean3.cpuMsPerRun.median,
          14 / LEAN.cpuMsPerRun,
        ),
      );
    }
  }
  if (results.h2) out.push(atMost('H2 p99 create → first task request at 20 runs/s', results.h2.firstTaskP99Ms.median, 15, 'ms'));
  if (results.h2 && results.lean?.latency)
    out.push(
      ratioAtMost(
        'H2 p99 ÷ lean reference’s p99 in this run (15 of its 14.2 ms)',
        results.h2.firstTaskP99Ms.median / results.lean.latency.firstTaskP99Ms.median,
        15 / LEAN.firstTaskP99,
      ),
    );
  // Each read's best of one API process and two sharing the port, as H1 takes the best worker count.
  const bestRead = (key: string): { read: ReadResult; apis: number } | undefined => {
    const one = results.h3?.find((read) => read.key === key);
    const shared = results.h3?.find((read) => read.key === `${key}${SHARED_PORT_SUFFIX}`);
    if (!one || !shared) return one && { read: one, apis: 1 };
    return shared.perSecond.median > one.perSecond.median ? { read: shared, apis: SHARED_PORT_APIS } : { read: one, apis: 1 };
  };
  for (const [key, label, target] of [
    ['tasks-20', 'H3 GET /organizations/:org/tasks, page 20', 2000],
    ['stages-20', 'H3 GET /runs/:id/task-stages (show-type)', 5000],
    ['result', 'H3 GET /task-results/:id (show)', 5000],
  ] as const) {
    const best = bestRead(key);
    if (best)
      out.push(
        atLeast(`${label} (best: ${best.apis} API process${best.apis > 1 ? 'es' : ''})`, best.read.perSecond.median, target, 'req/s'),
      );
    const lean = results.lean?.reads?.find((read) => read.key === key);
    const reference = key.startsWith('tasks') ? LEAN.listPerSecond : LEAN.pkRoutePerSecond;
    if (best && lean)
      out.push(
        ratioAtLeast(
          `${label} ÷ lean reference in this run (${target.toLocaleString('en-US')} of its ${reference.toLocaleString('en-US')} req/s)`,
          best.read.perSecond.median / lean.perSecond.median,
          target / reference,
        ),
      );
  }
  const slope = slopeOf(results.h4?.tasks ?? []);
  if (slope) out.push(atMost('H4 CPU-ms per extra task result (slope over T = 1, 3, 10)', slope.b, 1.5, 'ms', 2));
  const leanSlope = slopeOf(results.lean?.pipeline ?? []);
  if (slope && leanSlope && (results.lean?.pipeline?.length ?? 0) >= 3)
    out.push(ratioAtMost('H4 slope ÷ lean reference’s slope in this run (1.5 of its 1.72)', slope.b / leanSlope.b, 1.5 / LEAN.slopeMs));
  if (results.h4?.workspaces) {
    const { one, many } = results.h4.workspaces;
    const ratio = many.runsPerSecond.median / one.runsPerSecond.median;
    const label = `H4 runs/s at ${many.config.workspaces.toLocaleString('en-US')} workspaces ÷ at ${one.config.workspaces}`;
    out.push({ ...atLeast(label, ratio, 0.9, '', 2), measured: fmt(ratio, 2) });
  }
  if (results.h4?.list) {
    const ratio = results.h4.list.large.p99Ms.median / results.h4.list.small.p99Ms.median;
    out.push({
      ...atMost(
        `H4 list p99 at ${results.h4.list.rows.large.toLocaleString('en-US')} rows ÷ at ${results.h4.list.rows.small.toLocaleString('en-US')}`,
        ratio,
        1.5,
        '',
        2,
      ),
      measured: fmt(ratio, 2),
    });
  }
  return out;
}

const r = (range: Range, digits = 1): string => fmtRange(range, digits);

/** One row per configuration; "÷ lean" compares with the lean reference of the same T measured in this run. */
function pipelineTable(results: readonly PipelineResult[], baseline: BaselineResult | undefined, all: Results): string[] {
  const lines = [
    '| configuration | runs/s | CPU-ms per run | ÷ component floor (CPU) | ÷ lean here: runs/s, CPU | ' +
      ROLES.join(' | ') +
      ' | Redis cmds/run | WAL KB/run | foreign CPU % |',
    '|---|---|---|---|---|' + ROLES.map(() => '---:').join('|') + '|---:|---:|---:|',
  ];
  for (const result of results) {
    const floor = baseline ? floorMsPerRun(baseline, 2, result.config.tasks) : Number.NaN;
    const foreign = result.samples.map((sample) => fmt(sample.foreignPercent, 0)).join(', ');
    const lean = result.config.lean ? undefined : leanPipeline(all, result.config.tasks);
    const versusLean = lean
      ? `${fmt(result.runsPerSecond.median / lean.runsPerSecond.median, 2)}, ${fmt(result.cpuMsPerRun.median / lean.cpuMsPerRun.median, 2)}×`
      : '–';
    lines.push(
      `| ${result.config.label} | ${r(result.runsPerSecond)} | ${r(result.cpuMsPerRun)} | ${fmt(result.cpuMsPerRun.median / floor, 1)}× (floor ${fmt(floor, 2)} ms) | ${versusLean} | ` +
        ROLES.map((role) => fmt(result.cpuMsPerRunByRole[role], 2)).join(' | ') +
        ` | ${fmt(result.redisCommandsPerRun, 0)} | ${fmt(result.walBytesPerRun / 1024, 1)} | ${foreign} |`,
    );
  }
  return lines;
}

/** "÷ lean": the lean reference's own figure on its machine, and its read of the same key measured in this run. */
function readTable(results: readonly ReadResult[], baseline: BaselineResult | undefined, leanReads: readonly ReadResult[] = []): string[] {
  const lines = [
    '| request (50 clients, closed loop) | req/s | p50 ms | p99 ms | CPU-ms per request | total-count | ÷ HTTP pair ceiling | ÷ lean, its machine | ÷ lean here |',
    '|---|---|---|---|---|---:|---:|---:|---:|',
  ];
  for (const result of results) {
    const lean = result.key.startsWith('tasks') ? LEAN.listPerSecond : LEAN.pkRoutePerSecond;
    const here = leanReads.includes(result) ? undefined : leanReads.find((read) => result.key.startsWith(read.key));
    lines.push(
      `| ${result.label} | ${r(result.perSecond, 0)} | ${r(result.p50Ms)} | ${r(result.p99Ms)} | ${r(result.cpuMsPerRequest, 3)} | ${result.totalCount ?? '–'} | ` +
        `${baseline ? fmt(result.perSecond.median / baseline.http.perSecond.median, 3) : 'n/a'} | ${fmt(result.perSecond.median / lean, 2)} (of ${lean.toLocaleString('en-US')}) | ` +
        `${here ? fmt(result.perSecond.median / here.perSecond.median, 2) : '–'} |`,
    );
  }
  return lines;
}

/** The notifications' open loop: a run's latency and CPU with N configurations per workspace beside none, below saturation. */
function openLoopTable({ open, with: withSome }: NotificationsResult): string[] {
  const figures: [string, (sample: LatencySample) => number, number][] = [
    ['create → applied p50 ms', (sample) => sample.completeP50Ms, 1],
    ['create → applied p99 ms', (sample) => sample.completeP99Ms, 1],
    ['first task request p50 ms', (sample) => sample.firstTaskP50Ms, 2],
    ['first task request p99 ms', (sample) => sample.firstTaskP99Ms, 2],
    ['CPU-ms per run', (sample) => sample.cpuMsPerRun, 1],
  ];
  return [
    `### The same at a steady ${open.rate} runs/s (open loop, ${open.seconds} s per sample, interleaved; median [min–max] of three)`,
    '',
    `| | none | ${withSome.config.notifications ?? 0} per workspace | with ÷ without (medians) |`,
    '|---|---:|---:|---:|',
    ...figures.map(([label, value, digits]) => {
      const without = range(open.without.map(value));
      const withThem = range(open.with.map(value));
      return `| ${label} | ${fmtRange(without, digits)} | ${fmtRange(withThem, digits)} | ${fmt(withThem.median / without.median, 3)} |`;
    }),
    '',
  ];
}

export function markdown(results: Results): string {
  const { meta, baseline } = results;
  const out: string[] = [];
  out.push(`# Benchmark results (${meta.mode}${meta.mode === 'quick' ? ': smoke run, figures not meaningful' : ''})`, '');
  out.push(
    `- Date: ${meta.date}; took ${Math.round(meta.durationSeconds / 60)} min (${meta.figures.join(', ')})`,
    `- Machine: ${meta.machine.cpu}, ${meta.machine.cores} cores, ${meta.machine.memoryGiB} GiB, Linux ${meta.machine.kernel}; every process on these cores (API, workers, task server, load generator, PostgreSQL, Redis)`,
    `- Versions: Node ${meta.versions.node}, PostgreSQL ${meta.versions.postgres}, Redis ${meta.versions.redis}, BullMQ ${meta.versions.bullmq}, MikroORM ${meta.versions.mikroOrm}, Koa ${meta.versions.koa}, undici ${meta.versions.undici}`,
    `- Code: commit ${meta.commit}${meta.workingTreeChanges ? ` plus ${meta.workingTreeChanges} uncommitted changes in the working tree` : ''}`,
    `- **Rate limiting: ${meta.rateLimiting}.** NODE_ENV=production, LOG_LEVEL=warn, WORKER_CONCURRENCY=${meta.workerConcurrency} (default), PostgreSQL and Redis as found (shared with other work on this machine)`,
    '- Method: warm-up first; three samples per figure, median [min–max]; each sample ≤ 60 s; CPU-ms from /proc/<pid>/stat (utime+stime) of every process (PostgreSQL: the backends of the benchmark database, except the harness’s own connection that polls for progress, plus the shared background processes; Redis: the whole server). "Foreign CPU" is the rest of the machine in the same window, % of one core (200 = both cores); a sample above 10 % is measured once more and the quieter one kept.',
    '',
  );
  const verdictList = verdicts(results);
  if (verdictList.length > 0) {
    out.push('## Targets', '', '| figure | target | measured (median) | verdict |', '|---|---|---|---|');
    for (const verdict of verdictList)
      out.push(`| ${verdict.figure} | ${verdict.target} | ${verdict.measured} | ${verdict.met ? 'met' : `**missed**: ${verdict.gap}`} |`);
    out.push('');
  }
  if (baseline) {
    out.push('## Component baseline (measured in this run)', '');
    out.push('| component | rate | CPU-ms per operation (client + server) | low-load latency p50 / p99 ms |', '|---|---|---|---|');
    out.push(
      `| one-row insert transaction (pg, 8 clients; latency at 1 client) | ${r(baseline.insert.perSecond, 0)} /s | ${r(baseline.insert.cpuMsPerOp, 3)} | ${r(baseline.insert.p50Ms, 2)} / ${r(baseline.insert.p99Ms, 2)} |`,
    );
    out.push(
      `| BullMQ no-op job, add + process (16 adds in flight, worker concurrency 16; latency add → processor start, one at a time) | ${r(baseline.job.perSecond, 0)} /s | ${r(baseline.job.cpuMsPerOp, 3)} | ${r(baseline.job.p50Ms, 2)} / ${r(baseline.job.p99Ms, 2)} |`,
    );
    out.push(
      `| undici request pair to the task server (signed 1.3 KB POST, HMAC checked, 200; 64 in flight; latency sequential) | ${r(baseline.http.perSecond, 0)} /s | ${r(baseline.http.cpuMsPerOp, 3)} | ${r(baseline.http.p50Ms, 2)} / ${r(baseline.http.p99Ms, 2)} |`,
    );
    out.push(
      '',
      'Component floor of a run with S stages × T tasks (the work any implementation must do): (1 + 2·S·T) request pairs + (1 + S + 2·S·T) one-row transactions + (1 + S) jobs of CPU. ' +
        (baseline
          ? `For 2 × 3 that is ${fmt(floorMsPerRun(baseline, 2, 3), 2)} CPU-ms, i.e. ${fmt(2000 / floorMsPerRun(baseline, 2, 3), 0)} runs/s on 2 cores.`
          : ''),
      '',
    );
  }
  if (results.h1?.length) {
    out.push(
      '## H1: pipeline throughput (closed-loop burst from 20 creators; 2 stages × T mandatory tasks; CPU-ms per run by process)',
      '',
    );
    out.push(...pipelineTable([...results.h1, ...(results.lean?.pipeline ?? [])], baseline, results), '');
    if (baseline) {
      const t3 = results.h1.find((result) => result.config.tasks === 3 && result.config.workers === 1);
      const lean3 = leanPipeline(results, 3);
      if (t3)
        out.push(
          `Ratios for 2 × 3, 1 worker: runs/s ÷ component-floor runs/s = ${fmt(t3.runsPerSecond.median / (2000 / floorMsPerRun(baseline, 2, 3)), 3)}; runs/s ÷ lean reference on its own machine (143) = ${fmt(t3.runsPerSecond.median / LEAN.runsPerSecond, 2)}; CPU-ms ÷ lean there (13.2) = ${fmt(t3.cpuMsPerRun.median / LEAN.cpuMsPerRun, 1)}.` +
            (lean3
              ? ` The lean reference itself, here: ${fmt(lean3.runsPerSecond.median, 1)} runs/s at ${fmt(lean3.cpuMsPerRun.median, 1)} CPU-ms (${fmt(lean3.cpuMsPerRun.median / floorMsPerRun(baseline, 2, 3), 1)}× the floor; ${fmt(lean3.runsPerSecond.median / LEAN.runsPerSecond, 2)} of its 143 there).`
              : ''),
          '',
        );
      if (lean3)
        out.push(
          "The lean reference (`bench/lean`) rebuilds the pipeline the targets were set from (docs/benchmarks.md): Koa and raw `pg`, BullMQ at concurrency 50, one transaction to start a run, two statements per callback; no auth, no validation, no enforcement, no outbox, no retries or deadlines, no logging. It runs on the same harness, task server and load generator, up at the same time as the project's configuration of the same T, their samples interleaved (project, lean, project, …), so both see the same minutes of the machine; the stack not being measured stands idle, its processes counted as foreign CPU.",
          '',
        );
    }
  }
  if (results.h1Cluster?.length) {
    out.push(
      '## H1 on a Redis Cluster beside one Redis node (both private, interleaved; target: the cluster within 15 % of the node)',
      '',
      ...pipelineTable(
        results.h1Cluster.flatMap((pair) => [pair.single, pair.cluster]),
        baseline,
        results,
      ),
      '',
      '| configuration | runs/s, cluster ÷ node | CPU-ms per run, cluster ÷ node | within 15 % |',
      '|---|---:|---:|---|',
      ...results.h1Cluster.map(({ single, cluster }) => {
        const speed = cluster.runsPerSecond.median / single.runsPerSecond.median;
        const cpu = cluster.cpuMsPerRun.median / single.cpuMsPerRun.median;
        return `| ${single.config.label.replace(/, one Redis node$/, '')} | ${fmt(speed, 3)} | ${fmt(cpu, 3)} | ${speed >= 0.85 ? 'yes' : '**no**'} |`;
      }),
      '',
    );
  }
  if (results.h1Notifications) {
    const { without, with: withSome, deliveredPerRun } = results.h1Notifications;
    const speed = withSome.runsPerSecond.median / without.runsPerSecond.median;
    const cpu = withSome.cpuMsPerRun.median / without.cpuMsPerRun.median;
    const settle = withSome.samples.map((sample) => fmt(sample.settleSeconds ?? Number.NaN, 2)).join(', ');
    out.push(
      `## H1 with ${withSome.config.notifications ?? 0} notification configurations per workspace beside none (one stack, interleaved)`,
      '',
      ...pipelineTable([without, withSome], baseline, results),
      '',
      '| runs/s, with ÷ without | CPU-ms per run (deliveries included), with ÷ without | notifications delivered per run | seconds from the last run final to the last delivery |',
      '|---:|---:|---|---|',
      `| ${fmt(speed, 3)} | ${fmt(cpu, 3)} | ${deliveredPerRun.map((value) => fmt(value, 2)).join(', ')} | ${settle} |`,
      '',
      ...openLoopTable(results.h1Notifications),
    );
  }
  if (results.h2) {
    const h2 = results.h2;
    const floor = baseline ? floorLatency(baseline) : undefined;
    out.push(
      `## H2: latency at a steady ${h2.rate} runs/s (open loop, ${h2.seconds} s per sample, from the scheduled send time; 2 × 3, 1 worker)`,
      '',
    );
    out.push('| | first task request p50 ms | p99 ms | create → applied p50 ms | p99 ms |', '|---|---|---|---|---|');
    out.push(
      `| warm (3 samples) | ${r(h2.firstTaskP50Ms, 2)} | ${r(h2.firstTaskP99Ms, 2)} | ${r(h2.completeP50Ms)} | ${r(h2.completeP99Ms)} |`,
    );
    out.push(
      `| cold: fresh processes, no warm-up (1 sample, ${h2.cold.runs} runs) | ${fmt(h2.cold.firstTaskP50Ms, 2)} | ${fmt(h2.cold.firstTaskP99Ms, 2)} | ${fmt(h2.cold.completeP50Ms, 1)} | ${fmt(h2.cold.completeP99Ms, 1)} |`,
    );
    const lean = results.lean?.latency;
    if (lean)
      out.push(
        `| lean reference, warm (3 samples, this run) | ${r(lean.firstTaskP50Ms, 2)} | ${r(lean.firstTaskP99Ms, 2)} | ${r(lean.completeP50Ms)} | ${r(lean.completeP99Ms)} |`,
        `| lean reference, cold | ${fmt(lean.cold.firstTaskP50Ms, 2)} | ${fmt(lean.cold.firstTaskP99Ms, 2)} | ${fmt(lean.cold.completeP50Ms, 1)} | ${fmt(lean.cold.completeP99Ms, 1)} |`,
      );
    out.push('');
    const segment = (name: SegmentName, pick: 'p50Ms' | 'p99Ms'): string =>
      r(range(h2.samples.map((sample) => sample.segments?.[name]?.[pick] ?? Number.NaN)), 2);
    out.push(
      "Where the time to the first task request goes (each segment on its own, so the p99s do not add up; from the database's timestamps):",
      '',
      '| segment | p50 ms | p99 ms |',
      '|---|---|---|',
      ...(Object.entries(SEGMENTS) as [SegmentName, string][])
        // A segment a run's file lacks (one written before the segment was cut) has no row.
        .filter(([name]) => h2.samples.some((sample) => Number.isFinite(sample.segments?.[name]?.p50Ms)))
        .map(([name, label]) => `| ${label} | ${segment(name, 'p50Ms')} | ${segment(name, 'p99Ms')} |`),
      '',
    );
    if (floor) {
      out.push(
        `Component floor (3 one-row transactions + 1 job + 1 request pair at p50; 2 transactions + job + pair at p99): p50 ${fmt(floor.p50, 2)} ms, p99 ${fmt(floor.p99, 2)} ms. ` +
          `floor ÷ project: p50 ${fmt(floor.p50 / h2.firstTaskP50Ms.median, 2)}, p99 ${fmt(floor.p99 / h2.firstTaskP99Ms.median, 2)}; lean reference ÷ project (5.9 / 14.2 ms, other machine): p50 ${fmt(LEAN.firstTaskP50 / h2.firstTaskP50Ms.median, 2)}, p99 ${fmt(LEAN.firstTaskP99 / h2.firstTaskP99Ms.median, 2)}` +
          (lean
            ? `; lean reference in this run ÷ project: p50 ${fmt(lean.firstTaskP50Ms.median / h2.firstTaskP50Ms.median, 2)}, p99 ${fmt(lean.firstTaskP99Ms.median / h2.firstTaskP99Ms.median, 2)}.`
            : '.'),
        '',
      );
    }
  }
  if (results.h3?.length) {
    out.push('## H3: API reads (one organization token; random page 1–5 or random resource)', '');
    const leanReads = results.lean?.reads ?? [];
    out.push(...readTable([...results.h3, ...leanReads], baseline, leanReads), '');
  }
  if (results.h4) {
    out.push('## H4: how cost grows', '');
    const slope = slopeOf(results.h4.tasks);
    const leanSlope = (results.lean?.pipeline?.length ?? 0) >= 3 ? slopeOf(results.lean?.pipeline ?? []) : undefined;
    if (slope && baseline) {
      const t3 = results.h4.tasks.find((result) => result.config.tasks === 3);
      const cost = slope.b * 2;
      out.push(
        `- Tasks per run: CPU-ms per run = ${fmt(slope.a, 2)} + ${fmt(slope.b, 2)} × (S·T) over T = ${results.h4.tasks.map((result) => result.config.tasks).join(', ')} (S = 2). ` +
          `Each extra task result costs ${fmt(slope.b, 2)} CPU-ms: ÷ component floor (${fmt(floorSlopeMs(baseline), 3)} ms) = ${fmt(slope.b / floorSlopeMs(baseline), 1)}×, ÷ lean 1.72 ms (its machine) = ${fmt(slope.b / LEAN.slopeMs, 2)}. ` +
          (leanSlope
            ? `The lean reference here: ${fmt(leanSlope.a, 2)} + ${fmt(leanSlope.b, 2)} × (S·T), so ÷ lean here = ${fmt(slope.b / leanSlope.b, 2)}. `
            : '') +
          (t3
            ? `One more task per stage (2 results) costs ${fmt(cost, 2)} ms per run, i.e. ${fmt(t3.runsPerSecond.median - 2000 / (t3.cpuMsPerRun.median + cost), 1)} runs/s less at T = 3 on 2 saturated cores.`
            : ''),
      );
    }
    const byPart = slopesLine(results.h4.tasks, results.lean?.pipeline);
    if (byPart) out.push(byPart);
    if (results.h4.workspaces) {
      const { one, many } = results.h4.workspaces;
      out.push(
        `- Workspaces (2 × 3, 1 worker; the two organizations on one stack, their samples interleaved): ${fmt(many.runsPerSecond.median, 1)} runs/s at ${many.config.workspaces.toLocaleString('en-US')} workspaces vs ${fmt(one.runsPerSecond.median, 1)} at ${one.config.workspaces} → ratio ${fmt(many.runsPerSecond.median / one.runsPerSecond.median, 2)}; CPU-ms per run ${fmt(many.cpuMsPerRun.median, 1)} vs ${fmt(one.cpuMsPerRun.median, 1)}; ` +
          `sample by sample (one, many): ${one.samples.map((sample, index) => `${fmt((many.samples[index]?.runsPerSecond ?? Number.NaN) / sample.runsPerSecond, 2)}`).join(', ')}.`,
      );
    }
    if (results.h4.list) {
      const list = results.h4.list;
      out.push(
        `- List growth, GET /organizations/:org/tasks page 20: p99 ${fmt(list.large.p99Ms.median, 1)} ms with ${list.rows.large.toLocaleString('en-US')} tasks in the organization vs ${fmt(list.small.p99Ms.median, 1)} ms with ${list.rows.small.toLocaleString('en-US')} → ratio ${fmt(list.large.p99Ms.median / list.small.p99Ms.median, 2)} (req/s ${fmt(list.large.perSecond.median, 0)} vs ${fmt(list.small.perSecond.median, 0)}). ` +
          `The ${list.rows.small.toLocaleString('en-US')}-task organization while the table holds ${(list.rows.large + list.rows.small).toLocaleString('en-US')} rows: p99 ${fmt(list.smallInLargeTable.p99Ms.median, 1)} ms → ratio ${fmt(list.smallInLargeTable.p99Ms.median / list.small.p99Ms.median, 2)}.`,
      );
    }
    out.push('');
    if (results.h4.tasks.length || results.h4.workspaces) {
      const rows = [
        ...results.h4.tasks.filter((result) => !(results.h1 ?? []).includes(result)),
        // The lean reference's rows go with H1's table when there is one.
        ...(results.h1 ? [] : (results.lean?.pipeline ?? [])),
        ...(results.h4.workspaces
          ? [results.h4.workspaces.one, results.h4.workspaces.many].filter((result) => !(results.h1 ?? []).includes(result))
          : []),
      ];
      if (rows.length) out.push(...pipelineTable(rows, baseline, results), '');
    }
    if (results.h4.list) out.push(...readTable([results.h4.list.large, results.h4.list.smallInLargeTable], baseline), '');
  }
  out.push(
    'Reproduce: `npm run bench` (everything, about 17 minutes) or `npm run bench:h1` … `bench:h4`, `bench:baseline`; add `-- --quick` for a smoke run of a few seconds per figure. Raw samples: the JSON file next to this one.',
    '',
  );
  return out.join('\n');
}

export function writeResults(results: Results, name: string): { json: string; md: string } {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = results.meta.date.replaceAll(':', '').replace(/\.\d+Z$/, 'Z');
  const json = `${RESULTS_DIR}/${name}-${results.meta.mode}-${stamp}.json`;
  writeFileSync(json, `${JSON.stringify(results, null, 1)}\n`);
  const md = `${RESULTS_DIR}/${name === 'bench' ? 'latest' : `${name}-latest`}${results.meta.mode === 'quick' ? '-quick' : ''}.md`;
  writeFileSync(md, markdown(results));
  writeFileSync(md.replace(/\.md$/, '.json'), `${JSON.stringify(results, null, 1)}\n`);
  return { json, md };
}
