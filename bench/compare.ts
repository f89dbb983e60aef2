/**
 * `npm run bench:compare -- <ref> [--rounds=N] [--tasks=T] [--quick]`: the H1 pipeline (2 stages × T
 * tasks, one worker) of an earlier commit against this working tree, on this machine, interleaved
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
import type { PipelineResult } from './lib/pipeline.ts';
import { cpuModel } from './lib/cpu.ts';
import { fmt, fmtRange, range, type Range } from './lib/stats.ts';

const argv = process.argv.slice(2);
const option = (name: string): string | undefined => argv.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3);
const ref = argv.find((arg) => !arg.startsWith('--'));
const rounds = Number(option('rounds') ?? 2);
const tasks = Number(option('tasks') ?? 3);
const quick = argv.includes('--quick');
if (!ref || !Number.isInteger(rounds) || rounds < 1 || rounds > 5 || !Number.isInteger(tasks) || tasks < 1 || tasks > 20) {
  process.stderr.write('usage: npm run bench:compare -- <git ref> [--rounds=1..5] [--tasks=1..20] [--quick]\n');
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
const LIMIT_MS = rounds * 2 * (quick ? 3 : 6) * 60_000;
setTimeout(() => abort(`comparison exceeded ${LIMIT_MS / 60_000} minutes: stopping`, 1), LIMIT_MS).unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => abort(`${signal}: stopping`, 130));

function runSide(root: string): Promise<PipelineResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [`${ROOT}bench/compare-side.ts`, root, String(tasks), ...(quick ? ['--quick'] : [])], {
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    });
    running = child;
    // Its progress lines are passed on; its last line is the result.
    let pending = '';
    let result: PipelineResult | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      const lines = (pending + chunk.toString('utf8')).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (line.startsWith('{')) result = JSON.parse(line) as PipelineResult;
        else process.stdout.write(`  ${line}\n`);
      }
    });
    child.on('error', reject);
    // 'close', not 'exit': the last of its output may still be unread when it exits.
    child.on('close', (code) => {
      running = undefined;
      if (pending.startsWith('{')) result = JSON.parse(pending) as PipelineResult;
      if (code !== 0 || !result) reject(new Error(`the ${root} side failed (exit ${code})`));
      else resolve(result);
    });
  });
}

interface Side {
  label: string;
  root: string;
  results: PipelineResult[];
}

prepareWorktree();
const sides: Side[] = [
  { label: `${ref} (${commit})`, root: worktree, results: [] },
  { label: `this tree (${here})`, root: ROOT.replace(/\/$/, ''), results: [] },
];
try {
  for (let round = 1; round <= rounds; round += 1) {
    for (const side of sides) {
      log(`round ${round}/${rounds}: ${side.label}`);
      const result = await runSide(side.root);
      log(`  ${fmt(result.runsPerSecond.median)} runs/s, ${fmt(result.cpuMsPerRun.median)} CPU-ms per run`);
      side.results.push(result);
    }
  }
} finally {
  removeWorktree();
}

const [base, head] = sides as [Side, Side];
const median = (values: readonly number[]): number => range(values).median;
const all = (side: Side, pick: (result: PipelineResult) => Range): Range =>
  range(side.results.flatMap((result) => [...pick(result).samples]));
const ratio = (pick: (result: PipelineResult) => Range): number[] =>
  head.results.map((result, index) => pick(result).median / pick(base.results[index] as PipelineResult).median);
const throughputRatios = ratio((result) => result.runsPerSecond);
const cpuRatios = ratio((result) => result.cpuMsPerRun);
const roles = Object.keys(head.results[0]?.cpuMsPerRunByRole ?? {});
const roleMedian = (side: Side, role: string): number =>
  median(side.results.map((result) => (result.cpuMsPerRunByRole as Record<string, number>)[role] ?? Number.NaN));

const date = new Date().toISOString();
const lines = [
  `# Comparison: H1 pipeline, 2 stages × ${tasks} tasks, 1 worker${quick ? ' (quick)' : ''}`,
  '',
  `- Date: ${date}; ${cpuModel()}; ${rounds} round(s), interleaved: ${sides.map((side) => side.label).join(', then ')}`,
  `- Each round of each side: the benchmark's H1 method (warm-up, three samples, median); every sample of a side below.`,
  '',
  '| side | runs/s | CPU-ms per run | ' + roles.join(' | ') + ' |',
  '|---|---|---|' + roles.map(() => '---:').join('|') + '|',
  ...sides.map(
    (side) =>
      `| ${side.label} | ${fmtRange(all(side, (result) => result.runsPerSecond))} | ${fmtRange(
        all(side, (result) => result.cpuMsPerRun),
        2,
      )} | ` +
      roles.map((role) => fmt(roleMedian(side, role), 2)).join(' | ') +
      ' |',
  ),
  '',
  `This tree ÷ ${ref}, round by round: runs/s ${throughputRatios.map((value) => fmt(value, 2)).join(', ')} (median ${fmt(median(throughputRatios), 2)}); ` +
    `CPU-ms per run ${cpuRatios.map((value) => fmt(value, 2)).join(', ')} (median ${fmt(median(cpuRatios), 2)}).`,
  '',
  'Reproduce: `npm run bench:compare -- <ref>` (about 2 × 2 minutes a round).',
];
const markdown = `${lines.join('\n')}\n`;
mkdirSync(RESULTS_DIR, { recursive: true });
writeFileSync(`${RESULTS_DIR}/compare-latest.md`, markdown);
writeFileSync(
  `${RESULTS_DIR}/compare-${date.replaceAll(':', '').replace(/\.\d+Z$/, 'Z')}.json`,
  `${JSON.stringify({ date, ref, commit, here, tasks, rounds, quick, sides }, null, 1)}\n`,
);
process.stdout.write(markdown);
log(`wrote ${RESULTS_DIR}/compare-latest.md`);
process.exit(0);
