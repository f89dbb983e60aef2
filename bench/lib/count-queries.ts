/**
 * Profiling aid, loaded with `--import` into the API and worker processes by `--profile` runs only:
 * counts every SQL statement sent through `pg` (which MikroORM, the outbox relay and the raw queries
 * all use), by statement shape, and writes the counts to BENCH_QUERY_COUNT_FILE on exit. On SIGUSR2 it
 * also writes, to `<file>.plans.json`, how often PostgreSQL planned each named prepared statement for
 * its values (custom) or reused its generic plan, summed over the connections that ran it.
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
/** Connections that ran a named statement; their pg_prepared_statements are read on SIGUSR2. */
const preparing = new Set<pg.Client>();
pg.Client.prototype.query = function query(this: pg.Client, ...args: unknown[]) {
  const first = args[0];
  if (typeof first === 'object' && first !== null && 'name' in first) preparing.add(this);
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
async function dumpPlans(): Promise<void> {
  if (!file) return;
  const plans: Record<string, { generic: number; custom: number }> = {};
  for (const client of preparing) {
    try {
      const result = (await original.call(client, 'select name, generic_plans, custom_plans from pg_prepared_statements')) as {
        rows: { name: string; generic_plans: string; custom_plans: string }[];
      };
      for (const row of result.rows) {
        const entry = (plans[row.name] ??= { generic: 0, custom: 0 });
        entry.generic += Number(row.generic_plans);
        entry.custom += Number(row.custom_plans);
      }
    } catch {
      preparing.delete(client);
    }
  }
  writeFileSync(`${file}.plans.json`, JSON.stringify(plans, null, 1));
}

// Written on demand too (SIGUSR2), so a harness can read counts between phases.
process.on('SIGUSR2', () => {
  dump();
  counts.clear();
  void dumpPlans();
});
