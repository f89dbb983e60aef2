/**
 * `npm run bench:compare -- <ref> [--rounds=N] [--tasks=T] [--figure=h1|h2|h3] [--quick]`: the H1 pipeline
 * (2 stages × T tasks, one worker), H2's latency at 20 runs/s or H3's API reads, of an earlier commit
 * against this working tree, on this machine, interleaved
 * (ref, here, ref, here, …) so that a machine getting busier or quieter moves both sides alike. Each
 * side runs the harness of its own checkout (bench/lib: processes, seeding, measuring), driven by this
 * tree's bench/compare-side.ts; the ref is checked out in a temporary git worktree outside the project
 * with a copy of this tree's node_modules (reinstalled from its own lockfile when that differs), and
 * removed at the end. Writes bench/results/compare-latest.md and a dated JSON file. A figure from one
 * run on a shared machine says little; the ratio of the two sides measured back to back says what a
 * change did.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { log, RESULTS_DIR, ROOT } from './lib/env.ts';
import type { LatencyResult, LatencySample } from './lib/latency.ts';
import type { PipelineResult } from './lib/pipeline.ts';
import { READ_CONCURRENCY as READS_CLIENTS, type ReadResult } from './lib/reads.ts';
import { cpuModel } from './lib/cpu.ts';
import { fmt, fmtRange, range, type Range } from './lib/stats.ts';

const argv = process.argv.slice(2);
const option = (name: string): string | undefined => argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
const ref = argv.find((arg) => !arg.startsWith('--'));
const rounds = Number(option('rounds') ?? 2);
const tasks = Number(option('tasks') ?? 3);
const figure = option('figure') ?? 'h1';
const quick = argv.includes('--quick');
if (
  !ref ||
  !Number.isInteger(rounds) ||
  rounds < 1 ||
  rounds > 5 ||
  !Number.isInteger(tasks) ||
  tasks < 1 ||
  tasks > 20 ||
  (figure !== 'h1' && figure !== 'h2' && figure !== 'h3')
) {
  process.stderr.write('usage: npm run bench:compare -- <git ref> [--rounds=1..5] [--tasks=1..20] [--figure=h1|h2|h3] [--quick]\n');
  process.exit(2);
}

const git = (...args: string[]): string => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
const commit = git('rev-parse', '--short', `${ref}^{commit}`);
const here = `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain').length > 0 ? ' plus uncommitted changes' : ''}`;
// Outside the project, so that nothing that walks the project (tsc, eslint, jest) sees a second copy.
const worktree = `${tmpdir()}/runtasks-compare-${commit}`;

function removeWorktree(): void {
  try {
    git('worktree', 'remove', '--force', worktree);
  } catch {
    // Not registered (any more): the folder may still be there.
  }
  rmSync(worktree, { recursive: true, force: true });
  git('worktree', 'prune');
}

/** A fresh checkout of the ref every time: one left by an interrupted comparison may be incomplete. */
function prepareWorktree(): void {
  removeWorktree();
  log(`checking out ${ref} (${commit}) in ${worktree}`);
  git('worktree', 'add', '--detach', worktree, commit);
  // Its own node_modules: the workspace packages are links relative to it, so they resolve to its code.
  cpSync(`${ROOT}node_modules`, `${worktree}/node_modules`, { recursive: true, verbatimSymlinks: true });
  if (git('diff', '--name-only', commit, '--', 'package-lock.json') !== '') {
    log(`  ${ref} has other dependencies: npm install in the worktree`);
    execFileSync('npm', ['install', '--no-audit', '--no-fund'], { cwd: worktree, stdio: 'inherit' });
  }
}

// The side running now: started in a process group of its own, with every process its harness starts,
// so that the watchdog and Ctrl-C end all of them.
let running: ChildProcess | undefined;
function abort(reason: string, code: number): never {
  process.stderr.write(`${reason}\n`);
  if (running?.pid !== undefined && running.exitCode === null) {
    try {
      process.kill(-running.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  removeWorktree();
  process.exit(code);
}

// Bounded like every benchmark: each side takes a few minutes at most.
const LIMIT_MS = rounds * 2 * (quick ? 3 : figure === 'h3' ? 10 : figure === 'h2' ? 4 : 6) * 60_000;
setTimeout(() => abort(`comparison exceeded ${LIMIT_MS / 60_000} minutes: stopping`, 1), LIMIT_MS).unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => abort(`${signal}: stopping`, 130));
// A failure of this process must not leave the running side (a detached process group) behind.
process.on('uncaughtException', (error) => abort(`comparison failed: ${error.stack ?? String(error)}`, 1));

/** The side's result line: a JSON object or array of objects (its progress lines start with "[bench"). */
const isResult = (line: string): boolean => line.startsWith('{') || line.startsWith('[{');

/** One side's measurement: a PipelineResult (h1), a LatencyResult (h2) or its ReadResult list (h3). */
function runSide<T>(root: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`${ROOT}bench/compare-side.ts`, root, String(tasks), figure, ...(quick ? ['--quick'] : [])], {
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    running = child;
    // Its progress lines are passed on; its last line is the result.
    let pending = '';
    let result: T | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString('utf8')).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (isResult(line)) result = JSON.parse(line) as T;
        else process.stdout.write(`  ${line}\n`);
      }
    });
    child.on('error', reject);
    // 'close', not 'exit': the last of its output may still be unread when it exits.
    child.on('close', (code) => {
      running = undefined;
      if (isResult(pending)) result = JSON.parse(pending) as T;
      if (code !== 0 || !result) reject(new Error(`the ${root} side failed (exit ${code})`));
      else resolve(result);
    });
  });
}

interface Side<T> {
  label: string;
  root: string;
  results: T[];
}

const median = (values: readonly number[]): number => range(values).median;
const ratios = (head: readonly number[], base: readonly number[]): number[] => head.map((value, index) => value / (base[index] as number));
const ratioLine = (name: string, values: readonly number[]): string =>
  `${name} ${values.map((value) => fmt(value, 2)).join(', ')} (median ${fmt(median(values), 2)})`;

async function measure<T>(): Promise<Side<T>[]> {
  prepareWorktree();
  const sides: Side<T>[] = [
    { label: `${ref} (${commit})`, root: worktree, results: [] },
    { label: `this tree (${here})`, root: ROOT.replace(/\/$/, ''), results: [] },
  ];
  try {
    for (let round = 1; round <= rounds; round += 1) {
      for (const side of sides) {
        log(`round ${round}/${rounds}: ${side.label}`);
        side.results.push(await runSide<T>(side.root));
      }
    }
  } finally {
    removeWorktree();
  }
  return sides;
}

function pipelineReport(sides: Side<PipelineResult>[]): string[] {
  const [base, head] = sides as [Side<PipelineResult>, Side<PipelineResult>];
  const all = (side: Side<PipelineResult>, pick: (result: PipelineResult) => Range): Range =>
    range(side.results.flatMap((result) => [...pick(result).samples]));
  const medians = (side: Side<PipelineResult>, pick: (result: PipelineResult) => Range): number[] =>
    side.results.map((result) => pick(result).median);
  const roles = Object.keys(head.results[0]?.cpuMsPerRunByRole ?? {});
  const roleMedian = (side: Side<PipelineResult>, role: string): number =>
    median(side.results.map((result) => (result.cpuMsPerRunByRole as Record<string, number>)[role] ?? Number.NaN));
  const throughput = (result: PipelineResult): Range => result.runsPerSecond;
  const cpu = (result: PipelineResult): Range => result.cpuMsPerRun;
  // The server's WAL per run moves far less with the machine's load than CPU does (a ref from before it was measured has none).
  const walKb = (side: Side<PipelineResult>): number => median(side.results.map((result) => (result.walBytesPerRun ?? Number.NaN) / 1024));
  return [
    `# Comparison: H1 pipeline, 2 stages × ${tasks} tasks, 1 worker${quick ? ' (quick)' : ''}`,
    '',
    `- Date: ${date}; ${cpuModel()}; ${rounds} round(s), interleaved: ${sides.map((side) => side.label).join(', then ')}`,
    `- Each round of each side: the benchmark's H1 method (warm-up, three samples, median); every sample of a side below.`,
    '',
    '| side | runs/s | CPU-ms per run | ' + roles.join(' | ') + ' | WAL KB per run |',
    '|---|---|---|' + roles.map(() => '---:').join('|') + '|---:|',
    ...sides.map(
      (side) =>
        `| ${side.label} | ${fmtRange(all(side, throughput))} | ${fmtRange(all(side, cpu), 2)} | ` +
        roles.map((role) => fmt(roleMedian(side, role), 2)).join(' | ') +
        ` | ${fmt(walKb(side), 1)} |`,
    ),
    '',
    `This tree ÷ ${ref}, round by round: ${ratioLine('runs/s', ratios(medians(head, throughput), medians(base, throughput)))}; ` +
      `${ratioLine('CPU-ms per run', ratios(medians(head, cpu), medians(base, cpu)))}.`,
    '',
    'Reproduce: `npm run bench:compare -- <ref>` (about 2 × 2 minutes a round).',
  ];
}

function readsReport(sides: Side<ReadResult[]>[]): string[] {
  const [base, head] = sides as [Side<ReadResult[]>, Side<ReadResult[]>];
  // Only the reads both sides measured, in this tree's order.
  const keys = (head.results[0] ?? []).map((read) => read.key).filter((key) => base.results[0]?.some((read) => read.key === key));
  const medians = (side: Side<ReadResult[]>, key: string, pick: (read: ReadResult) => Range): number[] =>
    side.results.map((round) => pick(round.find((read) => read.key === key) as ReadResult).median);
  const throughput = (read: ReadResult): Range => read.perSecond;
  const cpu = (read: ReadResult): Range => read.cpuMsPerRequest;
  const labelOf = (key: string): string => (head.results[0] ?? []).find((read) => read.key === key)?.label ?? key;
  return [
    `# Comparison: H3 API reads (${READS_CLIENTS} clients, closed loop)${quick ? ' (quick)' : ''}`,
    '',
    `- Date: ${date}; ${cpuModel()}; ${rounds} round(s), interleaved: ${sides.map((side) => side.label).join(', then ')}`,
    `- Each round of each side: the benchmark's H3 method (warm-up, three samples, median); below, the median over rounds.`,
    '',
    `| request | ${base.label} req/s | this tree req/s | ratio by round | ${base.label} CPU-ms/req | this tree CPU-ms/req | ratio by round |`,
    '|---|---:|---:|---|---:|---:|---|',
    ...keys.map((key) => {
      const [b, h] = [medians(base, key, throughput), medians(head, key, throughput)];
      const [bc, hc] = [medians(base, key, cpu), medians(head, key, cpu)];
      const byRound = (values: number[]): string => values.map((value) => fmt(value, 2)).join(', ');
      return `| ${labelOf(key)} | ${fmt(median(b))} | ${fmt(median(h))} | ${byRound(ratios(h, b))} | ${fmt(median(bc), 3)} | ${fmt(median(hc), 3)} | ${byRound(ratios(hc, bc))} |`;
    }),
    '',
    'Reproduce: `npm run bench:compare -- <ref> --figure=h3` (about 2 × 4 minutes a round).',
  ];
}

/**
 * H2's figures side by side: the first task request's p50 and p99 (from the load generator's send time),
 * and the part of it from the run's creation to its first delivery attempt, cut at the database's
 * timestamps (so the API's HTTP and the POST are left out): where a change to how a run's first job
 * reaches the worker shows. A ref from before that segment was measured has none ("–", and "n/a" as a ratio).
 */
function latencyReport(sides: Side<LatencyResult>[]): string[] {
  const [base, head] = sides as [Side<LatencyResult>, Side<LatencyResult>];
  type Pick = (sample: LatencySample) => number;
  const firstP50: Pick = (sample) => sample.firstTaskP50Ms;
  const firstP99: Pick = (sample) => sample.firstTaskP99Ms;
  const publishedP50: Pick = (sample) => sample.segments?.published?.p50Ms ?? Number.NaN;
  const publishedP99: Pick = (sample) => sample.segments?.published?.p99Ms ?? Number.NaN;
  const cpu: Pick = (sample) => sample.cpuMsPerRun;
  const all = (side: Side<LatencyResult>, pick: Pick, digits = 2): string => {
    const values = side.results.flatMap((result) => result.samples.map(pick)).filter(Number.isFinite);
    return values.length === 0 ? '–' : fmtRange(range(values), digits);
  };
  const byRound = (side: Side<LatencyResult>, pick: Pick): number[] => side.results.map((result) => median(result.samples.map(pick)));
  return [
    `# Comparison: H2 latency at 20 runs/s, 2 stages × 3 tasks, 1 worker${quick ? ' (quick)' : ''}`,
    '',
    `- Date: ${date}; ${cpuModel()}; ${rounds} round(s), interleaved: ${sides.map((side) => side.label).join(', then ')}`,
    `- Each round of each side: the benchmark's H2 method (fresh processes, a warm-up burst, three open-loop samples); every sample of a side below.`,
    '',
    '| side | first task request p50 ms | p99 ms | run created → first attempt p50 ms | p99 ms | CPU-ms per run |',
    '|---|---|---|---|---|---|',
    ...sides.map(
      (side) =>
        `| ${side.label} | ${all(side, firstP50)} | ${all(side, firstP99)} | ${all(side, publishedP50)} | ${all(side, publishedP99)} | ${all(side, cpu, 1)} |`,
    ),
    '',
    `This tree ÷ ${ref}, round by round: ${ratioLine('first task request p50', ratios(byRound(head, firstP50), byRound(base, firstP50)))}; ` +
      `${ratioLine('p99', ratios(byRound(head, firstP99), byRound(base, firstP99)))}; ` +
      `${ratioLine('run created → first attempt p50', ratios(byRound(head, publishedP50), byRound(base, publishedP50)))}.`,
    '',
    'Reproduce: `npm run bench:compare -- <ref> --figure=h2` (about 2 × 1.5 minutes a round).',
  ];
}

const date = new Date().toISOString();
const sides =
  figure === 'h1' ? await measure<PipelineResult>() : figure === 'h2' ? await measure<LatencyResult>() : await measure<ReadResult[]>();
const lines =
  figure === 'h1'
    ? pipelineReport(sides as Side<PipelineResult>[])
    : figure === 'h2'
      ? latencyReport(sides as Side<LatencyResult>[])
      : readsReport(sides as Side<ReadResult[]>[]);
const markdown = `${lines.join('\n')}\n`;
mkdirSync(RESULTS_DIR, { recursive: true });
writeFileSync(`${RESULTS_DIR}/compare-latest.md`, markdown);
writeFileSync(
  `${RESULTS_DIR}/compare-${date.replaceAll(':', '').replace(/\.\d+Z$/, 'Z')}.json`,
  `${JSON.stringify({ date, ref, commit, here, figure, tasks, rounds, quick, sides }, null, 1)}\n`,
);
process.stdout.write(markdown);
log(`wrote ${RESULTS_DIR}/compare-latest.md`);
process.exit(0);
