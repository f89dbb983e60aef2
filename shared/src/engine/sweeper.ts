import type { EntityManager } from '@mikro-orm/postgresql';
import { EXPIRE_IN_FLIGHT_SQL, EXPIRE_IN_STAGES_SQL, EXPIRE_ONE_SQL, OVERDUE_DELIVERIES_SQL } from './results.sql.ts';
import { IDLE_RUNS_SQL } from './runs.sql.ts';
import { nativePool } from '../db/prepared.ts';
import type { LocalTimeouts } from '../domain/executions.ts';
import { runsThatMayMove } from './run-read.ts';
import { admitStalledQueues } from './workspace-queue.ts';

/** Where a look at idle runs goes on from: after this run (its `created_at` as PostgreSQL's text, to the microsecond). */
export interface IdleRunCursor {
  createdAt: string;
  id: string;
}

export interface SweepResult {
  /** Runs to advance: a result of theirs expired, or they were left behind. */
  runIds: string[];
  /** Results whose next delivery attempt is overdue (its delayed job was lost). */
  resultIds: { id: string; attempt: number }[];
  /** Where the next pass goes on looking at idle runs; undefined when this one looked at them all. */
  idleCursor: IdleRunCursor | undefined;
}

export interface SweepOptions {
  /** Where the last pass stopped looking at idle runs. */
  idleCursor?: IdleRunCursor | undefined;
  /** Idle runs read (and judged) at a time. */
  idlePageSize?: number;
  /** Pages of idle runs one pass reads at most; the next pass goes on from there. */
  idlePages?: number;
  /** Delivery attempts a result may have (TASK_RETRY_DELAYS_SECONDS' count and one): no re-drive past them. */
  maxAttempts?: number;
  /** How long a local run waits for its pipeline's report: one waiting longer is woken, and its advance ends it. */
  localTimeouts?: LocalTimeouts;
}

const IDLE_PAGE_SIZE = 500;
/** No limit on attempts: the largest value of `attempts` (an int). */
const ANY_ATTEMPTS = 2_147_483_647;
const IDLE_PAGES_PER_PASS = 20;

/** Ends the due results of the runs in flight (the sweeper), or of some stages or one result (a deadline job). Returns their runs. */
export async function expireResults(
  em: EntityManager,
  only: { resultId: string } | { stageIds: readonly string[] } | undefined = undefined,
): Promise<string[]> {
  const [sql, params] =
    only === undefined
      ? [EXPIRE_IN_FLIGHT_SQL, []]
      : 'stageIds' in only
        ? [EXPIRE_IN_STAGES_SQL, [only.stageIds]]
        : [EXPIRE_ONE_SQL, [only.resultId]];
  const { rows } = await (await nativePool(em)).query<{ run_id: string }>(sql, params);
  return rows.map((row) => row.run_id);
}

/**
 * The idle runs that have something to do (a wake-up of theirs was lost), judged page by page with the
 * run engine's own rule. Those that wait, for a slow task server or for a person's decision, are left
 * alone however long they wait, and never hide the others: the look goes on past them, page after page,
 * from one pass to the next.
 */
async function idleRunsThatMayMove(
  em: EntityManager,
  graceSeconds: number,
  options: SweepOptions,
): Promise<{ runIds: string[]; cursor: IdleRunCursor | undefined }> {
  const pageSize = options.idlePageSize ?? IDLE_PAGE_SIZE;
  const runIds: string[] = [];
  let cursor = options.idleCursor;
  const pool = await nativePool(em);
  for (let page = 0; page < (options.idlePages ?? IDLE_PAGES_PER_PASS); page += 1) {
    const from = cursor?.createdAt ?? '-infinity';
    const { rows } = await pool.query<{ id: string; cursor_at: string }>(IDLE_RUNS_SQL, [
      graceSeconds,
      from,
      from,
      cursor?.id ?? '',
      pageSize,
    ]);
    const seen = rows.map((row) => row.id);
    runIds.push(...(await runsThatMayMove(em, seen, options.localTimeouts)));
    const last = rows.at(-1);
    // A short page was the last one: the next pass starts again from the oldest.
    if (!last || rows.length < pageSize) return { runIds, cursor: undefined };
    cursor = { createdAt: last.cursor_at, id: last.id };
  }
  return { runIds, cursor };
}

/**
 * The safety net that makes Redis optional for correctness: deadlines live in PostgreSQL, and this
 * periodic pass ends expired results and re-drives whatever a lost job left behind.
 */
export async function sweep(em: EntityManager, graceSeconds: number, options: SweepOptions = {}): Promise<SweepResult> {
  await admitStalledQueues(await nativePool(em));
  const expired = await expireResults(em);
  const { rows: overdue } = await (
    await nativePool(em)
  ).query<{ id: string; attempts: number }>(OVERDUE_DELIVERIES_SQL, [graceSeconds, options.maxAttempts ?? ANY_ATTEMPTS]);
  const idle = await idleRunsThatMayMove(em, graceSeconds, options);
  const runIds = [...new Set([...expired, ...idle.runIds])];
  return { runIds, resultIds: overdue.map((row) => ({ id: row.id, attempt: row.attempts + 1 })), idleCursor: idle.cursor };
}
