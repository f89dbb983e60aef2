/**
 * The benchmark suite. `npm run bench` runs everything (about 17 minutes, then it stops by itself);
 * `npm run bench:<figure>` one figure (baseline, h1, h2, h3, h4), always with the component baseline
 * so its ratios can be computed. `-- --quick`: a smoke run of a few seconds per figure.
 * `-- --profile`: the API and worker processes run with --cpu-prof and the SQL statement counter.
 * `bench:h1 -- --notifications=N`: H1's 2 × 3 with N notification configurations per workspace beside none.
 *
 * Every process is on this machine; the benchmark uses its own database (runtasks_bench, dropped
 * and re-created) and its own Redis key prefixes, and never touches the services themselves.
 */
import { randomBytes } from 'node:crypto';
import { runBaseline } from './lib/baseline.ts';
import { log, parseOptions } from './lib/env.ts';
import { runLatency } from './lib/latency.ts';
import {
  runPipeline,
  runPipelineBesideCluster,
  runPipelineBesideLean,
  runWorkspaceGrowth,
  type PipelineConfig,
  type PipelineResult,
} from './lib/pipeline.ts';
import { runPipelineWithNotifications } from './lib/notifications-bench.ts';
import { killAll } from './lib/procs.ts';
import { runReads } from './lib/reads.ts';
import { collectMeta, markdown, writeResults, type Results } from './lib/report.ts';
import { QUEUE_LANES } from './lib/seed.ts';
import { freshDatabase } from './lib/stack.ts';

const FIGURES = ['baseline', 'h1', 'h2', 'h3', 'h4'] as const;
const options = parseOptions();
const asked = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const unknown = asked.filter((name) => name !== 'all' && !(FIGURES as readonly string[]).includes(name));
if (unknown.length > 0) {
  process.stderr.write(`unknown figure(s) ${unknown.join(', ')}: use all, ${FIGURES.join(', ')}\n`);
  process.exit(2);
}
const all = asked.length === 0 || asked.includes('all');
const want = (figure: (typeof FIGURES)[number]): boolean => all || asked.includes(figure);

// The whole suite must end by itself: a hard limit well above its normal duration.
const LIMIT_MS = (options.quick ? 8 : 40) * 60_000;
const watchdog = setTimeout(() => {
  process.stderr.write(`benchmark exceeded ${LIMIT_MS / 60_000} minutes: stopping\n`);
  killAll();
  process.exit(1);
}, LIMIT_MS);
watchdog.unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    killAll();
    process.exit(130);
  });
}

const startedAt = Date.now();
const tag = randomBytes(2).toString('hex');
const config = (key: string, label: string, tasks: number, workers: number, workspaces = 1): PipelineConfig => ({
  key: `${key}${tag}`,
  label,
  tasks,
  workers,
  workspaces,
});

log(`benchmark (${options.quick ? 'quick' : 'full'}): ${all ? 'all figures' : asked.join(', ')}; fresh database`);
await freshDatabase();
const results: Results = { meta: undefined as unknown as Results['meta'] };
results.baseline = await runBaseline(options);

// The lean reference (bench/lean) runs beside each configuration it has an equivalent of, their
// samples interleaved, so both see the same minutes of this machine.
const lean = (tasks: number): PipelineConfig => ({
  ...config(`lean${tasks}`, `lean reference, 2 × ${tasks}, 1 worker`, tasks, 1),
  lean: true,
});
if (options.notifications > 0) {
  // H1's 2 × 3, 1 worker with N notification configurations per workspace beside none, instead of H1's configurations.
  if (!want('h1') || options.redisCluster) {
    process.stderr.write('--notifications=N measures H1 alone: use npm run bench:h1 -- --notifications=N\n');
    process.exit(2);
  }
  results.h1Notifications = await runPipelineWithNotifications(config('t3w1', '2 × 3, 1 worker', 3, 1), options.notifications, options);
} else if (options.redisCluster) {
  // H1's configurations side by side on a Redis node and a Redis Cluster of the benchmark's own, instead of H1 on the machine's Redis.
  if (!want('h1')) {
    process.stderr.write('--redis-cluster measures H1: use npm run bench:h1 -- --redis-cluster\n');
    process.exit(2);
  }
  results.h1Cluster = [];
  for (const [key, label, tasks, workers] of [
    ['t3w1', '2 × 3, 1 worker', 3, 1],
    ['t3w2', '2 × 3, 2 workers', 3, 2],
    ['t1w1', '2 × 1, 1 worker', 1, 1],
    ['t10w1', '2 × 10, 1 worker', 10, 1],
  ] as const)
    results.h1Cluster.push(await runPipelineBesideCluster(config(key, label, tasks, workers), options));
} else if (want('h1') || want('h4')) {
  // Alone: two workers, and T = 1 and 10 when H4 (whose slope compares them with the lean reference's) is not asked for.
  const withLean = async (ofService: PipelineConfig, tasks: number): Promise<{ project: PipelineResult; lean?: PipelineResult }> =>
    want('h4') || tasks === 3 ? runPipelineBesideLean(ofService, lean(tasks), options) : { project: await runPipeline(ofService, options) };
  const { project: t3, lean: lean3 } = await withLean(config('t3w1', '2 × 3, 1 worker', 3, 1), 3);
  const pipeline: PipelineResult[] = [t3];
  if (want('h1')) pipeline.push(await runPipeline(config('t3w2', '2 × 3, 2 workers', 3, 2), options));
  const { project: t1, lean: lean1 } = await withLean(config('t1w1', '2 × 1, 1 worker', 1, 1), 1);
  const { project: t10, lean: lean10 } = await withLean(config('t10w1', '2 × 10, 1 worker', 10, 1), 10);
  results.lean = { pipeline: [lean3, lean1, lean10].filter((result): result is PipelineResult => result !== undefined) };
  if (want('h1')) results.h1 = [...pipeline, t1, t10];
  if (want('h4')) {
    const workspaces = await runWorkspaceGrowth(
      config('t3w1i', `2 × 3, 1 worker, ${QUEUE_LANES} workspaces (interleaved)`, 3, 1, QUEUE_LANES),
      config('t3w10k', '2 × 3, 1 worker, 10,000 workspaces (interleaved)', 3, 1, 10_000),
      options,
    );
    results.h4 = { tasks: [t1, t3, t10], workspaces };
  }
}
if (want('h2')) {
  results.h2 = await runLatency(options);
  results.lean = { ...results.lean, latency: await runLatency(options, true) };
}
if (want('h3') || want('h4')) {
  const reads = await runReads(options, { h3: want('h3'), growth: want('h4') });
  if (want('h3')) {
    results.h3 = reads.h3;
    results.lean = { ...results.lean, reads: reads.lean };
  }
  if (want('h4')) results.h4 = { tasks: results.h4?.tasks ?? [], workspaces: results.h4?.workspaces, list: reads.growth };
}

results.meta = await collectMeta(options, all ? ['all'] : asked, startedAt);
const variant = options.redisCluster ? '-cluster' : options.notifications > 0 ? `-notifications${options.notifications}` : '';
const written = writeResults(results, all ? 'bench' : `${asked.join('-')}${variant}`);
process.stdout.write(`\n${markdown(results)}\n`);
log(`wrote ${written.md} and ${written.json} in ${Math.round((Date.now() - startedAt) / 1000)} s`);
clearTimeout(watchdog);
