/**
 * `npm run bench:cli-archive`: the CLI's configuration archive against the cases of issue 43, each
 * beside a baseline measured in the same run on the same machine (ratios, not absolute times).
 *
 * - A `.terraformignore` line that backtracks (`**a**a**a**a**a**b`) with a 200-character name, against
 *   the same tree with `*.tfvars`; and the RegExp reading of that line on short names, to show what the
 *   automaton replaced.
 * - A tree with a large `.git/` (200,000 files; `--quick`: 20,000) against the same tree without it:
 *   `.git/` is not listed at all, unless a `!` rule (`!*.tf`) could match inside it.
 * - Peak memory (max RSS) of a process archiving a 1 GiB sparse file: refused before compressing with the
 *   default limit, and compressed whole with RUNTASKS_MAX_ARCHIVE_BYTES at 1 GiB, against a process
 *   archiving one small file.
 *
 * Prints a Markdown table and writes bench/results/cli-archive-<time>.json. Needs no service.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, closeSync, ftruncateSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { archiveDirectory } from '../cli/src/archive.ts';
import { Glob, type StepMeter } from '../cli/src/glob.ts';
import { RESULTS_DIR } from './lib/env.ts';

const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 3 : 7;
const GIT_FILES = quick ? 20_000 : 200_000;
const ARCHIVE = fileURLToPath(new URL('../cli/src/archive.ts', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'runtasks-bench-archive-'));

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** Milliseconds of each case, median of `rounds`, the cases interleaved so that load moves them alike. */
async function interleaved(cases: Record<string, () => Promise<unknown>>, rounds = ROUNDS): Promise<Record<string, number>> {
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((name) => [name, []]));
  for (let round = 0; round < rounds; round += 1) {
    for (const [name, run] of Object.entries(cases)) {
      const started = performance.now();
      await run();
      samples[name]?.push(performance.now() - started);
    }
  }
  return Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, median(values)]));
}

function tree(name: string, files: Record<string, string>): string {
  const dir = join(work, name);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}

// 1. The line that backtracks.
const longName = 'a'.repeat(200);
const pathological = tree('pathological', { 'main.tf': 'terraform {}\n', [longName]: '', '.terraformignore': '**a**a**a**a**a**b\n' });
const plain = tree('plain', { 'main.tf': 'terraform {}\n', [longName]: '', '.terraformignore': '*.tfvars\n' });
// A few milliseconds each: many rounds, so that the medians rise above a busy machine's noise.
const patternTimes = await interleaved(
  { pathological: () => archiveDirectory(pathological), plain: () => archiveDirectory(plain) },
  ROUNDS * 6,
);
const meter: StepMeter = { steps: 0 };
const glob = new Glob('**/**a**a**a**a**a**b');
glob.matches(longName, meter);
const regexMs: Record<string, number> = {};
for (const length of [32, 48, 64]) {
  const samples: number[] = [];
  for (let round = 0; round < 3; round += 1) {
    const started = performance.now();
    new RegExp('^(?:.*/)?.*a.*a.*a.*a.*a.*b$').test('a'.repeat(length));
    samples.push(performance.now() - started);
  }
  regexMs[String(length)] = median(samples);
}

// 2. A large .git/ beside a small configuration.
const config: Record<string, string> = { 'main.tf': 'terraform {}\n' };
for (let index = 0; index < 20; index += 1) config[`modules/m${index}/main.tf`] = `# module ${index}\n`;
const withGit = tree('with-git', config);
const withoutGit = tree('without-git', config);
for (let directory = 0; directory < 256; directory += 1) {
  const objects = join(withGit, '.git/objects', directory.toString(16).padStart(2, '0'));
  mkdirSync(objects, { recursive: true });
  for (let file = 0; file < GIT_FILES / 256; file += 1) writeFileSync(join(objects, file.toString(16).padStart(38, '0')), '');
}
const reinclude = join(work, 'with-git-reinclude');
execFileSync('cp', ['-a', withGit, reinclude]);
writeFileSync(join(reinclude, '.terraformignore'), '!*.tf\n');
// Listing 200,000 names leaves garbage that would land on whichever case comes next: its own pairing.
const gitTimes = await interleaved({ 'with .git': () => archiveDirectory(withGit), 'without .git': () => archiveDirectory(withoutGit) });
const listedTimes = await interleaved({
  'with .git and !*.tf': () => archiveDirectory(reinclude),
  'without .git': () => archiveDirectory(withoutGit),
});

// 3. Peak memory with a 1 GiB sparse file, in processes of their own.
const sparseDir = tree('sparse', { 'main.tf': 'terraform {}\n' });
const fd = openSync(join(sparseDir, 'disk.img'), 'w');
ftruncateSync(fd, 1024 ** 3);
closeSync(fd);
const small = tree('small', { 'main.tf': 'terraform {}\n' });
function peak(dir: string, env: Record<string, string> = {}): { maxRssMiB: number; ms: number; outcome: string } {
  const script = `import { archiveDirectory } from ${JSON.stringify(ARCHIVE)};
    const started = performance.now();
    const outcome = await archiveDirectory(${JSON.stringify(dir)}).then((a) => 'archived, ' + a.archive.length + ' bytes', () => 'refused');
    process.stdout.write(JSON.stringify({ maxRssMiB: process.resourceUsage().maxRSS / 1024, ms: performance.now() - started, outcome }));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' });
  return JSON.parse(out) as { maxRssMiB: number; ms: number; outcome: string };
}
const memory = {
  'one small file': peak(small),
  '1 GiB sparse, default limit': peak(sparseDir),
  '1 GiB sparse, limit 1 GiB': peak(sparseDir, { RUNTASKS_MAX_ARCHIVE_BYTES: String(1024 ** 3) }),
};

rmSync(work, { recursive: true, force: true });

const f = (value: number, digits = 1): string => value.toFixed(digits);
const lines = [
  `CLI archive benchmark (${quick ? 'quick' : 'full'}: medians of ${ROUNDS * 6} interleaved rounds for the pattern, ${ROUNDS} for .git, which has ${GIT_FILES} files)`,
  '',
  '| Case | Measured | Baseline | Ratio |',
  '| --- | --- | --- | --- |',
  `| \`**a**a**a**a**a**b\` and a 200-character name | ${f(patternTimes['pathological'] as number)} ms | \`*.tfvars\`: ${f(patternTimes['plain'] as number)} ms | ${f((patternTimes['pathological'] as number) / (patternTimes['plain'] as number), 2)} |`,
  `| its automaton on the name alone | ${meter.steps} visits (${glob.size} states) | bound (2n + 1) × m = ${(2 * 200 + 1) * glob.size} | |`,
  `| the RegExp reading on 32, 48, 64 characters | ${Object.values(regexMs)
    .map((ms) => f(ms))
    .join(', ')} ms | | ${f((regexMs['64'] as number) / (regexMs['32'] as number), 1)} (64 vs 32) |`,
  ...[gitTimes, listedTimes].map((times) => {
    const [name, measured] = Object.entries(times)[0] as [string, number];
    const baseline = times['without .git'] as number;
    return `| ${name} (${GIT_FILES} files in .git) | ${f(measured)} ms | without .git: ${f(baseline)} ms | ${f(measured / baseline, 2)} |`;
  }),
  ...Object.entries(memory)
    .filter(([name]) => name !== 'one small file')
    .map(
      ([name, run]) =>
        `| max RSS, ${name} (${run.outcome}, ${f(run.ms, 0)} ms) | ${f(run.maxRssMiB, 0)} MiB | one small file: ${f(memory['one small file'].maxRssMiB, 0)} MiB | ${f(run.maxRssMiB / memory['one small file'].maxRssMiB, 2)} |`,
    ),
];
process.stdout.write(`${lines.join('\n')}\n`);
mkdirSync(RESULTS_DIR, { recursive: true });
const stamp = new Date().toISOString().replace(/[:.]/g, '').slice(0, 15);
writeFileSync(
  join(RESULTS_DIR, `cli-archive-${stamp}Z.json`),
  `${JSON.stringify({ quick, rounds: ROUNDS, gitFiles: GIT_FILES, patternTimes, visits: meter.steps, states: glob.size, regexMs, gitTimes, listedTimes, memory }, null, 2)}\n`,
);
