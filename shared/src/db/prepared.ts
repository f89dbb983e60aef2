import { DeadlockException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import pg, { type Pool, type PoolClient, type PoolConfig, type QueryResultRow } from 'pg';

const { Pool: PgPool } = pg;

/**
 * A statement PostgreSQL parses and plans once per connection (a named prepared statement) rather
 * than at every execution, as MikroORM's `execute` does (it inlines the parameters into the text):
 * for the statements every request, result or callback runs, planning costs more than running
 * (docs/design.md, "Hot statements are prepared"). Parameters are `$1`, `$2`, … and may repeat.
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
 * parsed once per connection. Texts past the limit run unprepared.
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
 * The session settings of a pool for statements that all find their rows by an index: generic plans
 * always, since PostgreSQL would plan a statement with an array parameter at every execution; no seq
 * scans, since a generic plan made while a table is small would scan it whole as it grows. Startup
 * `options`, so they hold for the session alone (docs/design.md, "Hot statements are prepared").
 */
export const GENERIC_INDEX_OPTIONS = '-c plan_cache_mode=force_generic_plan -c enable_seqscan=off';

/** `base`'s connection settings with GENERIC_INDEX_OPTIONS added to whatever `options` they already give. */
export function withGenericIndexOptions(base: PoolConfig, env: NodeJS.ProcessEnv = process.env): PoolConfig {
  const join = (given: string | null | undefined): string => [given, GENERIC_INDEX_OPTIONS].filter(Boolean).join(' ');
  if (base.connectionString && URL.canParse(base.connectionString)) {
    // A URL's own `options` win over the configuration's (pg reads the URL last): merged into the URL.
    const url = new URL(base.connectionString);
    url.searchParams.set('options', join(url.searchParams.get('options') ?? base.options ?? env['PGOPTIONS']));
    return { ...base, connectionString: url.toString() };
  }
  return { ...base, options: join(base.options ?? env['PGOPTIONS']) };
}

/**
 * A pool of its own, beside `base` (the same server, database, credentials and connection settings),
 * whose sessions run generic plans that read by index (GENERIC_INDEX_OPTIONS), for statements used
 * there alone: each needs no transaction to carry the settings. The caller ends it.
 */
export function genericIndexPool(base: Pool, max: number): Pool {
  const pool = new PgPool({ ...withGenericIndexOptions(base.options), max, min: 0 });
  // An idle client whose connection breaks emits 'error' on the pool, which would otherwise end the process.
  pool.on('error', () => undefined);
  return pool;
}

/**
 * genericIndexPool, tried once: where the server refuses its settings (a pooler, see
 * refusedStartupOptions), `base` itself, whose statements plan as every other statement does (the
 * advance's write then for its values at every execution: slower, as correct), after `onRefused`. A
 * server that is down for now does not count: the pool connects once it is back.
 */
export async function genericIndexPoolOrBase(
  base: Pool,
  max: number,
  onRefused: (error: unknown) => void,
): Promise<{ pool: Pool; end: () => Promise<void> }> {
  const pool = genericIndexPool(base, max);
  try {
    // Closed at once (released as broken): the advances open their connections as they need them.
    (await pool.connect()).release(true);
  } catch (error) {
    if (refusedStartupOptions(error)) {
      onRefused(error);
      await pool.end();
      return { pool: base, end: async () => undefined };
    }
  }
  return { pool, end: () => pool.end() };
}

/**
 * Whether a connection was refused for its startup settings: PgBouncer in transaction mode refuses
 * `options` it does not track (`unsupported startup parameter`, SQLSTATE 08P01, protocol violation).
 */
export function refusedStartupOptions(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  return code === '08P01' || (typeof message === 'string' && /unsupported (options )?startup parameter/i.test(message));
}

/**
 * Keeps a checked-out client's connection errors from ending the process; returns what undoes it, to
 * call before the client is released. The pool listens for the errors of its idle clients only, and
 * PostgreSQL ends a connection under a client that is out too (idle_in_transaction_session_timeout
 * after a worker was stopped mid-transaction, a restart): with no listener that 'error' event is
 * unhandled, and the process exits. The client's queries fail with the error all the same.
 */
export function guardCheckedOut(client: PoolClient): () => void {
  const ignore = (): void => undefined;
  client.on('error', ignore);
  return () => void client.removeListener('error', ignore);
}

/**
 * Runs `work` in a transaction on one client of the pool. The client is handed back broken (and so
 * discarded) when the rollback fails too: its connection is in an unknown state.
 */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const unguard = guardCheckedOut(client);
  try {
    await client.query('begin');
    const result = await work(client);
    await client.query('commit');
    unguard();
    client.release();
    return result;
  } catch (error) {
    try {
      await client.query('rollback');
      unguard();
      client.release();
    } catch (rollbackError) {
      unguard();
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
