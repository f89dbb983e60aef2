/**
 * Profiling aid, loaded with `--import` into the API and worker processes by `--profile` runs only:
 * counts every SQL statement sent through `pg` (which MikroORM, the outbox relay and the raw queries
 * all use), by statement shape, and writes the counts to BENCH_QUERY_COUNT_FILE on exit.
 */
import { writeFileSync } from 'node:fs';
import pg from 'pg';

const counts = new Map<string, number>();
const file = process.env['BENCH_QUERY_COUNT_FILE'];

/** The statement with its literals and parameter lists collapsed, so one shape is one key. */
function shape(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .replace(/'[^']*'/g, "'…'")
    .replace(/\$\d+(\s*,\s*\$\d+)*/g, '$n')
    .replace(/\(\s*\$n\s*\)(\s*,\s*\(\s*\$n\s*\))+/g, '($n), …')
    .trim()
    .slice(0, 240);
}

const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
pg.Client.prototype.query = function query(this: unknown, ...args: unknown[]) {
  const first = args[0];
  const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
  const key = shape(text);
  counts.set(key, (counts.get(key) ?? 0) + 1);
  return original.apply(this, args);
} as typeof pg.Client.prototype.query;

function dump(): void {
  if (!file) return;
  const sorted = [...counts.entries()].sort((a, b) => b[1] - a[1]);
  writeFileSync(file, JSON.stringify(Object.fromEntries(sorted), null, 1));
}

process.on('exit', dump);
// Written on demand too (SIGUSR2), so a harness can read counts between phases.
process.on('SIGUSR2', () => {
  dump();
  counts.clear();
});
