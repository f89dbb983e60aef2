import { randomBytes } from 'node:crypto';
import type { Role } from './cpu.ts';
import { log, sleep, type Options } from './env.ts';
import { burstSample, describeSample } from './pipeline.ts';
import { leanOrg, seedPipelineOrg, truncateRuns, type PipelineOrg } from './seed.ts';
import { Stack } from './stack.ts';
import { percentile, range, round, sortedCopy, type Range } from './stats.ts';

/**
 * H2: open loop at a fixed rate (20 runs/s), 2 stages × 3 tasks, one worker. Each run is timed from
 * its scheduled send time (so a slow server cannot slow the load down and hide its own latency) to
 * the first task request the task server receives, and to the run's `applied-at`.
 */

export interface LatencySample {
  runs: number;
  missing: number;
  firstTaskP50Ms: number;
  firstTaskP99Ms: number;
  firstTaskMaxMs: number;
  completeP50Ms: number;
  completeP99Ms: number;
  cpuMsPerRun: number;
  /** By process, as H1 reports it: at a steady rate, work the burst shares between runs is each run's own. */
  cpuMsPerRunByRole: Record<Role, number>;
  foreignPercent: number;
  maxSendLagMs: number;
  /** Where the time to the first task request goes, p50 and p99 of each segment (SEGMENTS); the service only. */
  segments?: Record<SegmentName, { p50Ms: number; p99Ms: number }>;
}

/**
 * The way from the scheduled send to the first task request, cut where the database records a time
 * (this machine's clock for all: the load generator, PostgreSQL's now() at each transaction's start,
 * the worker's clock as an attempt starts, the task server): the API receiving the request and
 * beginning its transaction; its commit, the API publishing the run's first job, and BullMQ and the
 * worker taking it up to the first delivery attempt (for a run created in its pre_plan stage, one
 * claim); that attempt signing and POSTing the payload. The outbox relay's claim of the run's event is
 * no cut: since the API publishes that job itself, the relay's publication is the net, not the way.
 */
export const SEGMENTS = {
  api: 'send → run created (HTTP, API until its transaction begins)',
  published: 'run created → first attempt starts (commit, the API publishing the job, BullMQ, worker, claim)',
  dispatch: 'first attempt starts → first task request (payload, signature, POST)',
} as const;
export type SegmentName = keyof typeof SEGMENTS;

export interface LatencyResult {
  rate: number;
  seconds: number;
  cold: LatencySample;
  samples: LatencySample[];
  firstTaskP50Ms: Range;
  firstTaskP99Ms: Range;
  completeP50Ms: Range;
  completeP99Ms: Range;
}

interface OpenResult {
  runs: [string, number, number][];
  errors: number;
  errorSamples: string[];
  maxLagMs: number;
}

export async function openSample(stack: Stack, org: PipelineOrg, rate: number, seconds: number): Promise<LatencySample> {
  await truncateRuns(stack);
  await stack.taskServer?.call({ cmd: 'record', on: true });
  const meter = stack.meter();
  meter.start();
  const open = await stack.loadgen.call<OpenResult>(
    { cmd: 'open', baseUrl: stack.baseUrl, token: org.token, workspaces: org.workspaces, rate, seconds },
    (seconds + 60) * 1000,
  );
  if (open.errors > 0) log(`  ${open.errors} creations failed: ${open.errorSamples.join(' | ')}`);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { rows } = await stack.db.query<{ open: string }>(stack.tables.unfinished);
    if (Number(rows[0]?.open) === 0 || Date.now() > deadline) break;
    await sleep(50);
  }
  const cpu = meter.stop();
  const first = (await stack.taskServer?.call<Record<string, number>>({ cmd: 'firstRequests' })) ?? {};
  await stack.taskServer?.call({ cmd: 'record', on: false });
  const { rows } = await stack.db.query<{ id: string; applied: number | null }>(stack.tables.applied);
  const applied = new Map(rows.map((row) => [row.id, row.applied === null ? undefined : Number(row.applied)]));
  const times = stack.lean
    ? { rows: [] }
    : await stack.db.query<{ id: string; created: number; started: number | null }>(
        `select r.id, extract(epoch from r.created_at) * 1000 as created,
                (select extract(epoch from min(da.started_at)) * 1000 from task_stages ts
                   join task_results tr on tr.task_stage_id = ts.id join delivery_attempts da on da.task_result_id = tr.id
                  where ts.run_id = r.id) as started
           from runs r`,
      );
  const cuts = new Map(times.rows.map((row) => [row.id, row]));
  const segments: Record<SegmentName, number[]> = { api: [], published: [], dispatch: [] };
  const firstTask: number[] = [];
  const complete: number[] = [];
  let missing = 0;
  for (const [id, scheduledAt] of open.runs) {
    const at = first[id];
    if (at === undefined) missing += 1;
    else firstTask.push(at - scheduledAt);
    const cut = cuts.get(id);
    if (at !== undefined && cut?.started != null) {
      const [created, started] = [Number(cut.created), Number(cut.started)];
      segments.api.push(created - scheduledAt);
      segments.published.push(started - created);
      segments.dispatch.push(at - started);
    }
    const done = applied.get(id);
    if (done !== undefined) complete.push(done - scheduledAt);
  }
  const a = sortedCopy(firstTask);
  const b = sortedCopy(complete);
  return {
    runs: open.runs.length,
    missing,
    firstTaskP50Ms: percentile(a, 50),
    firstTaskP99Ms: percentile(a, 99),
    firstTaskMaxMs: percentile(a, 100),
    completeP50Ms: percentile(b, 50),
    completeP99Ms: percentile(b, 99),
    cpuMsPerRun: cpu.totalMs / Math.max(1, open.runs.length),
    cpuMsPerRunByRole: Object.fromEntries(Object.entries(cpu.ms).map(([role, ms]) => [role, ms / Math.max(1, open.runs.length)])) as Record<
      Role,
      number
    >,
    foreignPercent: cpu.foreignPercent,
    maxSendLagMs: open.maxLagMs,
    ...(stack.lean
      ? {}
      : {
          segments: Object.fromEntries(
            Object.entries(segments).map(([name, values]) => {
              const sorted = sortedCopy(values);
              return [name, { p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) }];
            }),
          ) as LatencySample['segments'],
        }),
  };
}

export const describeLatency = (sample: LatencySample): string =>
  `${sample.runs} runs, first task request p50 ${round(sample.firstTaskP50Ms, 2)} / p99 ${round(sample.firstTaskP99Ms, 2)} / max ${round(sample.firstTaskMaxMs, 1)} ms, ` +
  `create→applied p50 ${round(sample.completeP50Ms, 1)} / p99 ${round(sample.completeP99Ms, 1)} ms, ${round(sample.cpuMsPerRun, 1)} CPU-ms/run ` +
  `(${Object.entries(sample.cpuMsPerRunByRole)
    .map(([role, ms]) => `${role} ${round(ms, 2)}`)
    .join(', ')}), ` +
  `foreign ${round(sample.foreignPercent, 0)} %, send lag max ${round(sample.maxSendLagMs, 1)} ms${sample.missing ? `, MISSING ${sample.missing}` : ''}`;

/** H2 of the service, or with `lean` of the lean reference (bench/lean) on the same harness. */
export async function runLatency(options: Options, lean = false): Promise<LatencyResult> {
  const rate = 20;
  const seconds = options.quick ? 3 : 15;
  log(`H2 latency${lean ? ', lean reference' : ''}: starting API, 1 worker, task server, load generator (fresh processes)`);
  const stack = await Stack.start({ workers: 1, profile: options.profile, ...(lean ? { lean: { tasks: 3 } } : {}) });
  try {
    const org = lean ? leanOrg() : await seedPipelineOrg(stack, `b-h2-${randomBytes(3).toString('hex')}`, 3, 1);
    // Cold: the processes have served only the setup requests (organization, workspace, tasks).
    const cold = await openSample(stack, org, rate, options.quick ? 2 : 5);
    log(`  cold (no warm-up): ${describeLatency(cold)}`);
    const warm = await burstSample(stack, org, options.quick ? 40 : 500);
    log(`  warm-up burst: ${describeSample(warm.sample)}`);
    await openSample(stack, org, rate, options.quick ? 1 : 5);
    const samples: LatencySample[] = [];
    for (let index = 0; index < 3; index += 1) {
      let sample = await openSample(stack, org, rate, seconds);
      if (!options.quick && sample.foreignPercent > 10) {
        log(`  sample ${index + 1}: foreign CPU ${round(sample.foreignPercent, 0)} % > 10 %: measuring it again`);
        const again = await openSample(stack, org, rate, seconds);
        if (again.foreignPercent < sample.foreignPercent) sample = again;
      }
      log(`  sample ${index + 1}: ${describeLatency(sample)}`);
      samples.push(sample);
    }
    return {
      rate,
      seconds,
      cold,
      samples,
      firstTaskP50Ms: range(samples.map((sample) => sample.firstTaskP50Ms)),
      firstTaskP99Ms: range(samples.map((sample) => sample.firstTaskP99Ms)),
      completeP50Ms: range(samples.map((sample) => sample.completeP50Ms)),
      completeP99Ms: range(samples.map((sample) => sample.completeP99Ms)),
    };
  } finally {
    await stack.stop();
  }
}
