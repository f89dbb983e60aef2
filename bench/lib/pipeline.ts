import { randomBytes } from 'node:crypto';
import type { CpuReport, Role } from './cpu.ts';
import { log, sleep, type Options } from './env.ts';
import { leanOrg, seedPipelineOrg, truncateRuns, type PipelineOrg } from './seed.ts';
import { RedisClusterSet, SingleNode } from '../../test/support/redis-topologies.ts';
import { Stack, type BenchRedis } from './stack.ts';
import { medianSample, range, round, type Range } from './stats.ts';

/** H1 and the H4 growth runs: a closed-loop burst of runs, measured until every run is final. */

export interface PipelineConfig {
  key: string;
  label: string;
  /** Tasks per stage (T); every run has S = 2 stages (pre_plan, post_plan). */
  tasks: number;
  workers: number;
  workspaces: number;
  /** The lean reference (bench/lean) instead of the service. */
  lean?: boolean;
  /** With `lean`: the guarded lean reference (bench/lean/guarded-*.ts), which keeps the service's guarantees. */
  guarded?: boolean;
  /** Enabled generic notification configurations per workspace (`--notifications`); set when compared with none. */
  notifications?: number;
}

export interface PipelineSample {
  runs: number;
  completed: number;
  failed: number;
  /** From the first run's creation to the last run's `applied-at` (database clock). */
  seconds: number;
  runsPerSecond: number;
  cpuMsPerRun: number;
  cpuMsPerRunByRole: Record<Role, number>;
  foreignPercent: number;
  machinePercent: number;
  harnessMs: number;
  redisCommandsPerRun: number;
  /** WAL PostgreSQL wrote per run (the whole server's WAL position: other work on it counts too). */
  walBytesPerRun: number;
  createP50Ms: number;
  createP99Ms: number;
  taskRequests: number;
  callbacksOk: number;
  callbackOther: number;
  badSignatures: number;
  timedOut: boolean;
  retried: boolean;
  /**
   * With `settle` (notifications): seconds from the runs being final to the work after them being done
   * (their notifications delivered); the CPU per run includes that work.
   */
  settleSeconds?: number;
}

export interface PipelineResult {
  config: PipelineConfig;
  warmup: { runs: number; runsPerSecond: number; seconds: number };
  samples: PipelineSample[];
  runsPerSecond: Range;
  cpuMsPerRun: Range;
  /** Per role, from the sample with the median CPU per run. */
  cpuMsPerRunByRole: Record<Role, number>;
  redisCommandsPerRun: number;
  walBytesPerRun: number;
}

const CONCURRENCY = 20;
const SAMPLE_LIMIT_MS = 60_000;

interface TaskServerStats {
  requests: number;
  verifications: number;
  badSignatures: number;
  callbacks: number;
  callbackErrors: number;
  callbackStatuses: Record<string, number>;
}

/**
 * The server's WAL insert position, in bytes. Not pg_stat_wal: backends report to it at most once a
 * second, so a sample of a few seconds read it late (a short sample could show none at all).
 */
async function walBytes(stack: Stack): Promise<number> {
  const { rows } = await stack.db.query<{ bytes: number }>(`select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8 as bytes`);
  return Number(rows[0]?.bytes ?? Number.NaN);
}

async function progress(stack: Stack): Promise<{ ok: number; failed: number; total: number }> {
  const { rows } = await stack.db.query<{ ok: string; failed: string; total: string }>(stack.tables.progress);
  const row = rows[0];
  return { ok: Number(row?.ok), failed: Number(row?.failed), total: Number(row?.total) };
}

/**
 * One burst of `runs` runs; returns when all are final or after 60 s. With `settle`, the meter runs on
 * after that until `settle()` is true (the work the runs left behind, such as their notifications, is done).
 */
export async function burstSample(
  stack: Stack,
  org: PipelineOrg,
  runs: number,
  limitMs = SAMPLE_LIMIT_MS,
  settle?: () => Promise<boolean>,
): Promise<{ sample: PipelineSample; cpu: CpuReport }> {
  await truncateRuns(stack);
  await sleep(300);
  const before = await stack.taskServer?.call<TaskServerStats>({ cmd: 'stats' });
  const meter = stack.meter();
  const commandsBefore = await stack.redisCommands();
  const walBefore = await walBytes(stack);
  meter.start();
  const started = performance.now();
  const creating = stack.loadgen.call<{ created: number; errors: number; errorSamples: string[]; createP50: number; createP99: number }>(
    { cmd: 'burst', baseUrl: stack.baseUrl, token: org.token, workspaces: org.workspaces, runs, concurrency: CONCURRENCY },
    limitMs + 30_000,
  );
  let created: Awaited<typeof creating> | undefined;
  void creating.then((value) => (created = value)).catch(() => undefined);
  let state: { ok: number; failed: number; total: number };
  let timedOut = false;
  for (;;) {
    await sleep(100);
    state = await progress(stack);
    if (created && state.ok + state.failed >= created.created) break;
    if (performance.now() - started > limitMs) {
      timedOut = true;
      break;
    }
  }
  const finalAt = performance.now();
  while (settle && !timedOut && !(await settle())) {
    await sleep(100);
    if (performance.now() - started > limitMs) timedOut = true;
  }
  const settleSeconds = settle ? (performance.now() - finalAt) / 1000 : undefined;
  const cpu = meter.stop();
  const creation = created ?? (await creating);
  if (creation.errors > 0) log(`  ${creation.errors} run creations failed: ${creation.errorSamples.join(' | ')}`);
  const commands = (await stack.redisCommands()) - commandsBefore;
  const wal = (await walBytes(stack)) - walBefore;
  const after = await stack.taskServer?.call<TaskServerStats>({ cmd: 'stats' });
  const { rows } = await stack.db.query<{ seconds: number | null }>(stack.tables.seconds);
  const seconds = Number(rows[0]?.seconds ?? Number.NaN);
  const completed = state.ok;
  const perRun = (ms: number): number => (completed > 0 ? ms / completed : Number.NaN);
  const statusDelta = (code: string): number => (after?.callbackStatuses[code] ?? 0) - (before?.callbackStatuses[code] ?? 0);
  const callbacksTotal = (after?.callbacks ?? 0) - (before?.callbacks ?? 0);
  const sample: PipelineSample = {
    runs: creation.created,
    completed,
    failed: state.failed,
    seconds,
    runsPerSecond: timedOut ? completed / (limitMs / 1000) : completed / seconds,
    cpuMsPerRun: perRun(cpu.totalMs),
    cpuMsPerRunByRole: Object.fromEntries(Object.entries(cpu.ms).map(([role, ms]) => [role, perRun(ms)])) as Record<Role, number>,
    foreignPercent: cpu.foreignPercent,
    machinePercent: cpu.machinePercent,
    harnessMs: cpu.harnessMs,
    redisCommandsPerRun: perRun(commands),
    walBytesPerRun: perRun(wal),
    createP50Ms: creation.createP50,
    createP99Ms: creation.createP99,
    taskRequests: (after?.requests ?? 0) - (before?.requests ?? 0),
    callbacksOk: statusDelta('200'),
    callbackOther: callbacksTotal - statusDelta('200') + (after?.callbackErrors ?? 0) - (before?.callbackErrors ?? 0),
    badSignatures: (after?.badSignatures ?? 0) - (before?.badSignatures ?? 0),
    timedOut,
    retried: false,
    ...(settleSeconds === undefined ? {} : { settleSeconds }),
  };
  return { sample, cpu };
}

export function describeSample(sample: PipelineSample): string {
  const roles = Object.entries(sample.cpuMsPerRunByRole)
    .map(([role, ms]) => `${role} ${round(ms, 2)}`)
    .join(', ');
  return (
    `${sample.completed}/${sample.runs} runs in ${round(sample.seconds, 2)} s = ${round(sample.runsPerSecond, 1)} runs/s, ` +
    `${round(sample.cpuMsPerRun, 2)} CPU-ms/run (${roles}), foreign ${round(sample.foreignPercent, 0)} %, ` +
    `task requests ${sample.taskRequests}, callbacks ok ${sample.callbacksOk}${sample.callbackOther ? ` other ${sample.callbackOther}` : ''}` +
    `${sample.settleSeconds === undefined ? '' : `, settled ${round(sample.settleSeconds, 2)} s after`}` +
    `${sample.badSignatures ? `, BAD SIGNATURES ${sample.badSignatures}` : ''}${sample.failed ? `, FAILED RUNS ${sample.failed}` : ''}${sample.timedOut ? ', TIMED OUT' : ''}`
  );
}

/** Foreign CPU above this (percent of one core) makes a sample be measured again, once. */
export const FOREIGN_RETRY_PERCENT = 10;

/** How the log names a configuration's samples beside another's: its notifications, its workspaces, or the lean reference. */
function sampleLabel(config: PipelineConfig): string {
  if (config.notifications !== undefined) return ` (${config.notifications} notification configurations per workspace)`;
  if (config.workspaces > 1) return ` (${config.workspaces.toLocaleString('en-US')} workspaces)`;
  if (config.guarded) return ' (guarded lean reference)';
  return config.lean ? ' (lean reference)' : '';
}

/** A warm-up burst; sizes the samples after it to about 12 s of runs at the warm-up's rate. */
export async function warmUp(
  stack: Stack,
  org: PipelineOrg,
  config: PipelineConfig,
  options: Options,
  settle?: () => Promise<boolean>,
): Promise<{ result: PipelineResult['warmup']; runs: number }> {
  const warmupRuns = options.quick ? 40 : Math.round(1500 / config.tasks);
  const warm = await burstSample(stack, org, warmupRuns, SAMPLE_LIMIT_MS, settle);
  log(`  warm-up${sampleLabel(config)}: ${describeSample(warm.sample)}`);
  const rate = Number.isFinite(warm.sample.runsPerSecond) && warm.sample.runsPerSecond > 0 ? warm.sample.runsPerSecond : 20;
  return {
    result: { runs: warm.sample.runs, runsPerSecond: warm.sample.runsPerSecond, seconds: warm.sample.seconds },
    runs: options.quick ? 60 : Math.max(150, Math.min(3000, Math.round(rate * 12))),
  };
}

/** One sample; measured once more, the quieter kept, when the rest of the machine was busy. */
export async function measuredSample(
  stack: Stack,
  org: PipelineOrg,
  config: PipelineConfig,
  runs: number,
  options: Options,
  index: number,
  settle?: () => Promise<boolean>,
): Promise<PipelineSample> {
  const label = sampleLabel(config);
  let { sample } = await burstSample(stack, org, runs, SAMPLE_LIMIT_MS, settle);
  if (!options.quick && sample.foreignPercent > FOREIGN_RETRY_PERCENT) {
    log(`  sample ${index + 1}${label}: foreign CPU ${round(sample.foreignPercent, 0)} % > ${FOREIGN_RETRY_PERCENT} %: measuring it again`);
    const again = (await burstSample(stack, org, runs, SAMPLE_LIMIT_MS, settle)).sample;
    sample = again.foreignPercent < sample.foreignPercent ? { ...again, retried: true } : { ...sample, retried: true };
  }
  log(`  sample ${index + 1}${label}: ${describeSample(sample)}`);
  return sample;
}

export function pipelineResult(config: PipelineConfig, warmup: PipelineResult['warmup'], samples: PipelineSample[]): PipelineResult {
  const middle = medianSample(samples, (sample) => sample.cpuMsPerRun);
  return {
    config,
    warmup,
    samples,
    runsPerSecond: range(samples.map((sample) => sample.runsPerSecond)),
    cpuMsPerRun: range(samples.map((sample) => sample.cpuMsPerRun)),
    cpuMsPerRunByRole: middle.cpuMsPerRunByRole,
    redisCommandsPerRun: middle.redisCommandsPerRun,
    walBytesPerRun: middle.walBytesPerRun,
  };
}

/**
 * H4's workspaces figure: the runs of one organization with few workspaces (the seed's queue lanes,
 * since a workspace runs one run at a time) against those of one with `many` workspaces (each with its own associations), on one stack and interleaved (one, many, one,
 * many, …) so that the machine getting busier or quieter moves both alike. Both organizations are in
 * the database throughout, so what is measured is runs spread over many workspaces, not a larger table.
 */
export async function runWorkspaceGrowth(
  one: PipelineConfig,
  many: PipelineConfig,
  options: Options,
): Promise<{ one: PipelineResult; many: PipelineResult }> {
  log(`${many.label}, interleaved with ${one.label}: starting API, 1 worker, task server, load generator`);
  const stack = await Stack.start({ workers: 1, profile: options.profile });
  try {
    const suffix = randomBytes(3).toString('hex');
    const orgOne = await seedPipelineOrg(stack, `b-${one.key}-${suffix}`.toLowerCase(), one.tasks, one.workspaces);
    const orgMany = await seedPipelineOrg(stack, `b-${many.key}-${suffix}`.toLowerCase(), many.tasks, many.workspaces);
    log(`  seeded two organizations: ${orgOne.workspaces.length} and ${orgMany.workspaces.length.toLocaleString('en-US')} workspace(s)`);
    const warmOne = await warmUp(stack, orgOne, one, options);
    const warmMany = await warmUp(stack, orgMany, many, options);
    const runs = Math.min(warmOne.runs, warmMany.runs);
    const samplesOne: PipelineSample[] = [];
    const samplesMany: PipelineSample[] = [];
    for (let index = 0; index < 3; index += 1) {
      samplesOne.push(await measuredSample(stack, orgOne, one, runs, options, index));
      samplesMany.push(await measuredSample(stack, orgMany, many, runs, options, index));
    }
    return { one: pipelineResult(one, warmOne.result, samplesOne), many: pipelineResult(many, warmMany.result, samplesMany) };
  } finally {
    await stack.stop();
  }
}

/** A stack for `config` (the service, or the lean reference where `config.lean`), with what its load generator drives. */
export async function startConfigured(
  config: PipelineConfig,
  options: Options,
  redis?: BenchRedis,
): Promise<{ stack: Stack; org: PipelineOrg }> {
  const stack = await Stack.start({
    workers: config.workers,
    profile: options.profile,
    redis,
    ...(config.lean ? { lean: { tasks: config.tasks, guarded: config.guarded === true } } : {}),
  });
  try {
    const name = `b-${config.key}-${randomBytes(3).toString('hex')}`.toLowerCase();
    const org = config.lean ? leanOrg() : await seedPipelineOrg(stack, name, config.tasks, config.workspaces);
    if (!config.lean) log(`  seeded ${name}: ${config.tasks} tasks × 2 stages, ${org.workspaces.length} workspace(s)`);
    return { stack, org };
  } catch (error) {
    await stack.stop();
    throw error;
  }
}

export async function runPipeline(config: PipelineConfig, options: Options): Promise<PipelineResult> {
  log(`${config.label}: starting API, ${config.workers} worker(s), task server, load generator`);
  const { stack, org } = await startConfigured(config, options);
  try {
    const warm = await warmUp(stack, org, config, options);
    const samples: PipelineSample[] = [];
    for (let index = 0; index < 3; index += 1) samples.push(await measuredSample(stack, org, config, warm.runs, options, index));
    return pipelineResult(config, warm.result, samples);
  } finally {
    await stack.stop();
  }
}

/**
 * A configuration of the service and the lean reference's equivalent (`lean`, whose `lean` is set),
 * both stacks up at once and their samples interleaved (service, lean, service, lean, …), so that the
 * machine getting busier or quieter moves both alike: their ratio is what the targets are set in, and
 * on a noisy machine samples taken one configuration after the other moved it by a third. The stack not
 * being measured stands idle; its pollers' few statements count with the other's PostgreSQL, and its
 * processes as foreign CPU.
 */
export async function runPipelineBesideLean(
  config: PipelineConfig,
  lean: PipelineConfig,
  options: Options,
): Promise<{ project: PipelineResult; lean: PipelineResult }> {
  log(`${config.label}, interleaved with the ${lean.label}: starting both`);
  const project = await startConfigured(config, options);
  let reference: { stack: Stack; org: PipelineOrg } | undefined;
  try {
    reference = await startConfigured(lean, options);
    const warmProject = await warmUp(project.stack, project.org, config, options);
    const warmLean = await warmUp(reference.stack, reference.org, lean, options);
    const projectSamples: PipelineSample[] = [];
    const leanSamples: PipelineSample[] = [];
    for (let index = 0; index < 3; index += 1) {
      projectSamples.push(await measuredSample(project.stack, project.org, config, warmProject.runs, options, index));
      leanSamples.push(await measuredSample(reference.stack, reference.org, lean, warmLean.runs, options, index));
    }
    return {
      project: pipelineResult(config, warmProject.result, projectSamples),
      lean: pipelineResult(lean, warmLean.result, leanSamples),
    };
  } finally {
    await reference?.stack.stop();
    await project.stack.stop();
  }
}

/** A Redis topology the benchmark started, as a stack uses it. */
function benchRedis(topology: SingleNode | RedisClusterSet): BenchRedis {
  return {
    env: topology.env(),
    cluster: topology instanceof RedisClusterSet,
    pids: () => topology.pids(),
    commands: () => topology.commandsProcessed(),
  };
}

/**
 * H1's configuration on a Redis node and on a Redis Cluster (three primaries, a replica each), both
 * started for the occasion from the same redis-server, both stacks up at once and their samples
 * interleaved (node, cluster, node, …), as beside the lean reference. The cluster's queue lives on one of
 * its primaries (the prefix's hash tag): what is measured is the cluster client, its redirections and
 * its replication, not sharding.
 */
export async function runPipelineBesideCluster(
  config: PipelineConfig,
  options: Options,
): Promise<{ single: PipelineResult; cluster: PipelineResult }> {
  log(`${config.label}: on one Redis node and on a Redis Cluster, interleaved: starting both`);
  const node = await SingleNode.start();
  const cluster = await RedisClusterSet.start().catch(async (error: unknown) => {
    await node.stop();
    throw error;
  });
  const singleConfig = { ...config, key: `${config.key}n`, label: `${config.label}, one Redis node` };
  const clusterConfig = { ...config, key: `${config.key}c`, label: `${config.label}, Redis Cluster` };
  let single: { stack: Stack; org: PipelineOrg } | undefined;
  let clustered: { stack: Stack; org: PipelineOrg } | undefined;
  try {
    single = await startConfigured(singleConfig, options, benchRedis(node));
    clustered = await startConfigured(clusterConfig, options, benchRedis(cluster));
    const warmSingle = await warmUp(single.stack, single.org, singleConfig, options);
    const warmCluster = await warmUp(clustered.stack, clustered.org, clusterConfig, options);
    const runs = Math.min(warmSingle.runs, warmCluster.runs);
    const singleSamples: PipelineSample[] = [];
    const clusterSamples: PipelineSample[] = [];
    for (let index = 0; index < 3; index += 1) {
      singleSamples.push(await measuredSample(single.stack, single.org, singleConfig, runs, options, index));
      clusterSamples.push(await measuredSample(clustered.stack, clustered.org, clusterConfig, runs, options, index));
    }
    return {
      single: pipelineResult(singleConfig, warmSingle.result, singleSamples),
      cluster: pipelineResult(clusterConfig, warmCluster.result, clusterSamples),
    };
  } finally {
    await clustered?.stack.stop();
    await single?.stack.stop();
    await cluster.stop();
    await node.stop();
  }
}
