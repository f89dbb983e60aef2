/**
 * The server's side of a profile: PostgreSQL's CPU by client (each process connects with its own
 * application_name), and what it spent on each statement shape, from pg_stat_statements. The latter
 * only when the server was started with it in shared_preload_libraries (a restart this harness never
 * does by itself); otherwise the profile says how to turn it on.
 */
import type pg from 'pg';
import { processTicks, TICK_MS } from './cpu.ts';
import { round } from './stats.ts';

export interface StatementCost {
  query: string;
  calls: number;
  execMs: number;
  planMs: number;
  walBytes: number;
  rows: number;
}

/**
 * True when the server can report per-statement costs (creates the extension in this database); false
 * when it cannot, or this user may not read the setting, create the extension or reset it.
 */
export async function statementStatsAvailable(db: pg.Client): Promise<boolean> {
  try {
    const { rows } = await db.query<{ libs: string }>(`select current_setting('shared_preload_libraries') as libs`);
    if (!(rows[0]?.libs ?? '').split(',').some((lib) => lib.trim() === 'pg_stat_statements')) return false;
    await db.query('create extension if not exists pg_stat_statements');
    await resetStatementStats(db);
    return true;
  } catch {
    return false;
  }
}

/** Forgets this database's statements only: the server may be shared with other work. */
export async function resetStatementStats(db: pg.Client): Promise<void> {
  await db.query('select pg_stat_statements_reset(0, (select oid from pg_database where datname = current_database()), 0)');
}

/** This database's statements, dearest first (execution plus planning time). */
export async function readStatementStats(db: pg.Client): Promise<StatementCost[]> {
  const { rows } = await db.query<{
    query: string;
    calls: string;
    exec_ms: number;
    plan_ms: number;
    wal_bytes: string;
    rows: string;
  }>(
    `select query, calls, total_exec_time as exec_ms, total_plan_time as plan_ms, wal_bytes, rows
       from pg_stat_statements
      where dbid = (select oid from pg_database where datname = current_database())
        and query not ilike '%pg_stat_statements%'
      order by total_exec_time + total_plan_time desc`,
  );
  return rows.map((row) => ({
    query: row.query,
    calls: Number(row.calls),
    execMs: row.exec_ms,
    planMs: row.plan_ms,
    walBytes: Number(row.wal_bytes),
    rows: Number(row.rows),
  }));
}

function shortened(query: string): string {
  return query.replace(/\s+/g, ' ').slice(0, 150).replaceAll('|', '\\|');
}

/** A Markdown table of the costs per unit of work (per run, per request). */
export function statementTable(costs: StatementCost[], units: number, unit: string, top = 25): string[] {
  const total = costs.reduce((sum, cost) => sum + cost.execMs + cost.planMs, 0);
  return [
    `Server time inside statements: ${round(total / units, 3)} ms per ${unit} (execution plus planning, in wall time: it includes lock waits and time the backend was off the CPU, not the commit and its WAL flush, which come after; planning shows only with pg_stat_statements.track_planning on).`,
    '',
    `| calls per ${unit} | exec ms per ${unit} | plan ms per ${unit} | µs per call | WAL bytes per call | rows per call | statement |`,
    '|---:|---:|---:|---:|---:|---:|---|',
    ...costs
      .slice(0, top)
      .map(
        (cost) =>
          `| ${round(cost.calls / units, 2)} | ${round(cost.execMs / units, 3)} | ${round(cost.planMs / units, 3)} | ${round(
            ((cost.execMs + cost.planMs) * 1000) / Math.max(cost.calls, 1),
            0,
          )} | ${round(cost.walBytes / Math.max(cost.calls, 1), 0)} | ${round(cost.rows / Math.max(cost.calls, 1), 1)} | \`${shortened(cost.query)}\` |`,
      ),
    '',
  ];
}

/** CPU ticks of each of this database's backends by pid, with the client's application_name. */
export type BackendTicks = Map<number, { client: string; ticks: number }>;

export async function backendTicks(db: pg.Client): Promise<BackendTicks> {
  const { rows } = await db.query<{ pid: number; application_name: string }>(
    `select pid, application_name from pg_stat_activity where datname = current_database() and backend_type = 'client backend'`,
  );
  const ticks: BackendTicks = new Map();
  for (const row of rows) {
    const value = processTicks(row.pid);
    if (value !== undefined) ticks.set(row.pid, { client: row.application_name || '(unnamed)', ticks: value });
  }
  return ticks;
}

/**
 * PostgreSQL CPU-ms per unit of work by client, between two snapshots. The benchmark's pools live
 * through a burst; a backend that ended in between is not counted, one that began counts from zero
 * (in an open loop pools may close idle connections, so read this table as a lower bound there).
 */
export function backendCpuTable(before: BackendTicks, after: BackendTicks, units: number, unit: string): string[] {
  const byClient = new Map<string, { ms: number; backends: number }>();
  for (const [pid, { client, ticks }] of after) {
    const entry = byClient.get(client) ?? { ms: 0, backends: 0 };
    entry.ms += (ticks - (before.get(pid)?.ticks ?? 0)) * TICK_MS;
    entry.backends += 1;
    byClient.set(client, entry);
  }
  return [
    `| client (application_name) | backends | PostgreSQL CPU-ms per ${unit} |`,
    '|---|---:|---:|',
    ...[...byClient.entries()]
      .sort((a, b) => b[1].ms - a[1].ms)
      .map(([client, entry]) => `| ${client} | ${entry.backends} | ${round(entry.ms / units, 2)} |`),
    '',
  ];
}
