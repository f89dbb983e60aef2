/**
 * `npm run bench:guarded [-- --quick]`: H1's pipeline (2 stages × 3 tasks, one worker) for three sides
 * on this machine, all up at once and their samples interleaved (service, lean, guarded lean, …): the
 * service, the lean reference (bench/lean, the H1 targets' yardstick) and the guarded lean reference
 * (bench/lean/guarded-*.ts: the lean reference plus the service's guarantees, each kept the cheapest way
 * known, docs/benchmarks.md). What the guarantees cost on their own is the guarded side against the lean
 * one; what the service costs beyond them is the service against the guarded side. Writes
 * bench/results/guarded-latest.md and a dated JSON file. Not part of `npm run bench`.
 */
import { writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { freshDatabase, type Stack } from './lib/stack.ts';
import { log, parseOptions, RESULTS_DIR } from './lib/env.ts';
import {
  measuredSample,
  pipelineResult,
  startConfigured,
  warmUp,
  type PipelineConfig,
  type PipelineResult,
  type PipelineSample,
} from './lib/pipeline.ts';
import type { PipelineOrg } from './lib/seed.ts';
import { fmt, fmtRange } from './lib/stats.ts';

const options = parseOptions();
const tag = randomBytes(2).toString('hex');
const TASKS = 3;
const sides: PipelineConfig[] = [
  { key: `t3w1${tag}`, label: 'the service', tasks: TASKS, workers: 1, workspaces: 1 },
  { key: `lean3${tag}`, label: 'the lean reference', tasks: TASKS, workers: 1, workspaces: 1, lean: true },
  { key: `guarded3${tag}`, label: 'the guarded lean reference', tasks: TASKS, workers: 1, workspaces: 1, lean: true, guarded: true },
];

// Ends by itself: a hard limit well above its normal duration (about 4 minutes, 1 with --quick).
const watchdog = setTimeout(
  () => {
    process.stderr.write('bench:guarded exceeded its time limit: stopping\n');
    process.exit(1);
  },
  (options.quick ? 5 : 20) * 60_000,
);
watchdog.unref();

log(`H1, 2 × ${TASKS}, 1 worker: the service, the lean reference and the guarded lean reference, interleaved; fresh database`);
await freshDatabase();
const started: { config: PipelineConfig; stack: Stack; org: PipelineOrg }[] = [];
const results: PipelineResult[] = [];
try {
  for (const config of sides) started.push({ config, ...(await startConfigured(config, options)) });
  const warm = [];
  for (const side of started) warm.push(await warmUp(side.stack, side.org, side.config, options));
  const samples: PipelineSample[][] = started.map(() => []);
  for (let index = 0; index < 3; index += 1)
    for (const [position, side] of started.entries())
      samples[position]?.push(await measuredSample(side.stack, side.org, side.config, warm[position]!.runs, options, index));
  for (const [position, side] of started.entries()) results.push(pipelineResult(side.config, warm[position]!.result, samples[position]!));
} finally {
  for (const side of started.reverse()) await side.stack.stop();
}

const [service, lean, guarded] = results as [PipelineResult, PipelineResult, PipelineResult];
const postgres = (result: PipelineResult): number => result.cpuMsPerRunByRole.postgres;
const ratios = (of: PipelineResult, to: PipelineResult): string =>
  `runs/s ${fmt(of.runsPerSecond.median / to.runsPerSecond.median, 2)}, CPU-ms per run ${fmt(of.cpuMsPerRun.median / to.cpuMsPerRun.median, 2)}, ` +
  `PostgreSQL CPU-ms per run ${fmt(postgres(of) / postgres(to), 2)}, WAL per run ${fmt(of.walBytesPerRun / to.walBytesPerRun, 2)}`;
const date = new Date().toISOString();
const lines = [
  `# H1 beside the lean reference and the guarded lean reference (${date})`,
  '',
  `${options.quick ? 'Quick (one small burst per sample)' : 'Full'}: 2 × ${TASKS}, 1 worker; warm-up, then three samples per side, interleaved; median [min–max].`,
  '',
  '| side | runs/s | CPU-ms per run | api | worker | task-server | postgres | redis | WAL KB per run |',
  '|---|---|---|---:|---:|---:|---:|---:|---:|',
  ...results.map(
    (result) =>
      `| ${result.config.label} | ${fmtRange(result.runsPerSecond)} | ${fmtRange(result.cpuMsPerRun, 2)} | ${fmt(result.cpuMsPerRunByRole.api, 2)} | ` +
      `${fmt(result.cpuMsPerRunByRole.worker, 2)} | ${fmt(result.cpuMsPerRunByRole['task-server'], 2)} | ${fmt(postgres(result), 2)} | ` +
      `${fmt(result.cpuMsPerRunByRole.redis, 2)} | ${fmt(result.walBytesPerRun / 1024, 1)} |`,
  ),
  '',
  `- The guarded lean reference ÷ the lean reference (what the guarantees cost): ${ratios(guarded, lean)}.`,
  `- The service ÷ the lean reference (H1's targets: runs/s ≥ 0.8, CPU-ms ≤ 1.3, PostgreSQL ≤ 1.5): ${ratios(service, lean)}.`,
  `- The service ÷ the guarded lean reference (what the service costs beyond its guarantees): ${ratios(service, guarded)}.`,
  '',
  'Reproduce: `npm run bench:guarded` (about 4 minutes; `-- --quick` for a smoke run).',
  '',
];
const stamp = date.replace(/[:.]/g, '').replace(/\d{3}Z$/, 'Z');
writeFileSync(
  `${RESULTS_DIR}/guarded-${options.quick ? 'quick-' : ''}${stamp}.json`,
  `${JSON.stringify({ date, quick: options.quick, results }, null, 2)}\n`,
);
writeFileSync(`${RESULTS_DIR}/guarded-latest.md`, lines.join('\n'));
process.stdout.write(`${lines.join('\n')}\n`);
log(`wrote ${RESULTS_DIR}/guarded-latest.md`);
process.exit(0);
