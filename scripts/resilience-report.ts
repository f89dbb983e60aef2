/**
 * Summarises what the resilience suites recorded (test-results/resilience/<suite>.json, written by
 * test/support/figures.ts during `npm test`, `npm run test:faults` and `npm run soak`) into
 * bench/results/resilience-latest.md and resilience-latest.json.
 *
 *   npm run resilience:report
 *
 * It only reports: the tests assert. A suite that did not run leaves no file and is listed as missing.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SOURCE = process.env['RESILIENCE_REPORT_DIR'] ?? join(ROOT, 'test-results', 'resilience');
const TARGET = join(ROOT, 'bench', 'results');
/** The suites of docs/resilience.md, in its order; anything else found is listed after them. */
const EXPECTED = ['processes', 'backing-services', 'task-servers', 'races', 'fuzz', 'redis-failover', 'soak'];

type Value = string | number | boolean | null | Record<string, string | number | boolean | null>;
interface SuiteFile {
  suite: string;
  updatedAt: string;
  scenarios: Record<string, Record<string, Value>>;
}

/** A nested figure with more entries than this (the fuzz's counts per route and status) is cut in the Markdown. */
const MAX_ENTRIES = 12;
/** Figures that say "something went wrong" when not zero, wherever a suite records them. */
const BAD = [
  'lost',
  'stuck',
  'invariantViolations',
  'violations',
  'duplicateStages',
  'duplicateResults',
  'serverErrors',
  'unexpectedExits',
];

function render(value: Value): string {
  if (value === null) return '—';
  if (typeof value === 'object') {
    const entries = Object.entries(value);
    const shown = entries.slice(0, MAX_ENTRIES).map(([key, inner]) => `${key}: ${String(inner)}`);
    if (entries.length > MAX_ENTRIES) shown.push(`… ${entries.length - MAX_ENTRIES} more in resilience-latest.json`);
    return shown.join(', ').replaceAll('|', '\\|') || '—';
  }
  return typeof value === 'number' ? value.toLocaleString('en-US') : String(value).replaceAll('|', '\\|');
}

const suites: SuiteFile[] = existsSync(SOURCE)
  ? readdirSync(SOURCE)
      .filter((name) => name.endsWith('.json') && !name.includes('-samples'))
      .map((name) => JSON.parse(readFileSync(join(SOURCE, name), 'utf8')) as SuiteFile)
      .filter((file) => typeof file.suite === 'string' && typeof file.scenarios === 'object')
  : [];
const order = (name: string): number => (EXPECTED.includes(name) ? EXPECTED.indexOf(name) : EXPECTED.length);
suites.sort((a, b) => order(a.suite) - order(b.suite) || a.suite.localeCompare(b.suite));

const summary = suites.map((file) => {
  const bad: string[] = [];
  for (const [scenario, figures] of Object.entries(file.scenarios))
    for (const key of BAD) if (typeof figures[key] === 'number' && figures[key] !== 0) bad.push(`${scenario}.${key} = ${figures[key]}`);
  return { suite: file.suite, updatedAt: file.updatedAt, scenarios: Object.keys(file.scenarios).length, bad };
});
const missing = EXPECTED.filter((name) => !suites.some((file) => file.suite === name));

const lines = [
  '# Resilience figures',
  '',
  `Generated ${new Date().toISOString()} by \`npm run resilience:report\` from ${SOURCE.replace(ROOT, '')}. Counts the suites`,
  'observed while their tests asserted; a figure here is never a target. See docs/resilience.md for the scenarios.',
  '',
  '| Suite | Scenarios | Recorded at | Non-zero failure figures |',
  '| --- | ---: | --- | --- |',
  ...summary.map((row) => `| ${row.suite} | ${row.scenarios} | ${row.updatedAt} | ${row.bad.length === 0 ? 'none' : row.bad.join('; ')} |`),
  ...missing.map((name) => `| ${name} | — | not run | — |`),
  '',
];
for (const file of suites) {
  lines.push(`## ${file.suite}`, '');
  for (const [scenario, figures] of Object.entries(file.scenarios)) {
    lines.push(`### ${scenario}`, '', '| Figure | Value |', '| --- | --- |');
    for (const [key, value] of Object.entries(figures)) lines.push(`| ${key} | ${render(value)} |`);
    lines.push('');
  }
}

mkdirSync(TARGET, { recursive: true });
writeFileSync(join(TARGET, 'resilience-latest.md'), `${lines.join('\n')}`);
writeFileSync(
  join(TARGET, 'resilience-latest.json'),
  `${JSON.stringify({ generatedAt: new Date().toISOString(), summary, missing, suites }, null, 2)}\n`,
);
process.stdout.write(
  `${summary.map((row) => `${row.suite}: ${row.scenarios} scenarios, ${row.bad.length === 0 ? 'no failure figures' : row.bad.join('; ')}`).join('\n')}\n` +
    (missing.length > 0 ? `not run: ${missing.join(', ')}\n` : '') +
    `written: bench/results/resilience-latest.md and .json\n`,
);
