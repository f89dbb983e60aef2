import { DeadlockException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg, { type Pool, type PoolClient, type QueryResultRow } from 'pg';

const { Pool: PgPool } = pg;

/**
 * A statement PostgreSQL parses and plans once per connection (a named prepared statement) rather
 * than at every execution, as MikroORM's `execute` does (it inlines the parameters into the text).
 * For the statements run for every request, task result or callback, planning a join costs the
 * server more than running it (measured: 140 µs planned each time, 40 µs prepared, for the run
 * snapshot's four-table join). Parameters are `$1`, `$2`, … and may repeat.
 *
 * Column lists are explicit, never `*`: a cached plan whose result columns change (a migration that
 * adds a column while this process runs) fails with "cached plan must not change result type".
 */
export interface PreparedStatement {
  readonly name: string;
  readonly text: string;
}

const names = new Set<string>();

/** Declares a prepared statement; names are unique per process, as PostgreSQL requires per connection. */
export function prepared(name: string, text: string): PreparedStatement {
  if (names.has(name)) throw new Error(`prepared statement ${name} is declared twice`);
  names.add(name);
  return { name, text };
}

/**
 * Prepared statements for a statement built from a few shapes (a run's advance writes the stages it
 * moved, the results it started and the run, in one statement whose text depends on which): each
 * distinct text is prepared under a name of its own, up to `limit` texts per family, so each is
 * parsed once per connection (and planned once where PostgreSQL settles on the generic plan; for
 * the advance's write it keeps planning for the values, see the README). Texts past the limit run
 * unprepared.
 */
export class StatementShapes {
  private readonly family: string;
  private readonly limit: number;
  private readonly shapes = new Map<string, PreparedStatement>();

  constructor(family: string, limit = 64) {
    this.family = family;
    this.limit = limit;
  }

  /** `text` with `$n` parameters. */
  async run<T extends QueryResultRow>(target: Queryable, text: string, values: readonly unknown[]): Promise<T[]> {
    let statement = this.shapes.get(text);
    if (!statement && this.shapes.size < this.limit) {
      statement = prepared(`${this.family}#${this.shapes.size + 1}`, text);
      this.shapes.set(text, statement);
    }
    if (statement) return runPrepared<T>(target, statement, values);
    return (await target.query<T>(text, [...values])).rows;
  }
}

/** Whatever runs a statement: the pool (its own transaction) or a client inside one. */
export type Queryable = Pool | PoolClient;

/** The `pg` pool under MikroORM's connection: one pool per process, as DATABASE_POOL_SIZE says. */
export function nativePool(em: EntityManager): Promise<Pool> {
  return em.getConnection().getNativeClient();
}

export async function runPrepared<T extends QueryResultRow>(
  target: Queryable,
  statement: PreparedStatement,
  values: readonly unknown[],
): Promise<T[]> {
  const result = await target.query<T>({ name: statement.name, text: statement.text, values: [...values] });
  return result.rows;
}

/**
 * The session settings of a pool that runs generic plans which read by index (`plan_cache_mode =
 * force_generic_plan`, `enable_seqscan = off`), for statements that all find their rows by an index.
 * Left to choose, PostgreSQL plans a statement with an array parameter (`unnest($1::text[])`) for its
 * values at every execution (it cannot tell the generic plan's cost from the array's length, and
 * planning costs more than running). Seq scans are off because a generic plan made while a table is
 * small (new, or just truncated) would scan it whole, and be kept as it grows.
 */
const GENERIC_INDEX_PLANS = 'set plan_cache_mode = force_generic_plan; set enable_seqscan = off';

/**
 * A pool of its own, beside `base` (the same server, database, credentials and connection options),
 * whose sessions run generic plans that read by index (GENERIC_INDEX_PLANS): for statements used there
 * alone, as session settings, so each statement needs no transaction to carry them. The settings go
 * with each new connection's first query; the caller ends the pool.
 */
export function genericIndexPool(base: Pool, max: number): Pool {
  const pool = new PgPool({ ...base.options, max, min: 0 });
  pool.on('connect', (client) => {
    // Queued before any query of the caller's (pg runs a client's queries in order). Should it fail, the
    // connection is ending: the caller's query fails too, and its error hands the client back broken.
    client.query(GENERIC_INDEX_PLANS).catch(() => undefined);
  });
  // An idle client whose connection breaks emits 'error' on the pool, which would otherwise end the process.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Runs `work` in a transaction on one client of the pool. The client is handed back broken (and so
 * discarded) when the rollback fails too: its connection is in an unknown state.
 */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const result = await work(client);
    await client.query('commit');
    client.release();
    return result;
  } catch (error) {
    try {
      await client.query('rollback');
      client.release();
    } catch (rollbackError) {
      client.release(rollbackError instanceof Error ? rollbackError : true);
    }
    throw error;
  }
}

/** PostgreSQL broke a deadlock by aborting this side (SQLSTATE 40P01; MikroORM calls it DeadlockException). */
export function isDeadlock(error: unknown): boolean {
  return error instanceof DeadlockException || (error as { code?: unknown }).code === '40P01';
}

/** Runs a statement written with `?` placeholders (MikroORM's style): an EntityManager, or `clientRunner`. */
export interface SqlRunner {
  execute<T>(sql: string, params?: unknown[]): Promise<T>;
}

/** `?` placeholders as `$1`, `$2`, … in order (the statements passed here have no `?` of their own). */
export function numbered(sql: string): string {
  let index = 0;
  return sql.replace(/\?/g, () => `$${(index += 1)}`);
}

/** A client inside `inTransaction` as a SqlRunner, for code shared with EntityManager callers. */
export function clientRunner(client: Queryable): SqlRunner {
  return {
    async execute<T>(sql: string, params: unknown[] = []): Promise<T> {
      return (await client.query(numbered(sql), params)).rows as T;
    },
  };
}
