import type { EntityManager } from '@mikro-orm/postgresql';
import { PAST_DEADLINE, PAST_HARD_DEADLINE } from './deadlines.ts';
import { resultTransition } from './transitions.ts';
import { DELIVERY_ERROR_DESCRIPTIONS, UNDELIVERABLE_ERROR_KINDS } from '../outbound/task-client.ts';
import { nativePool } from '../db/prepared.ts';
import { runsThatMayMove } from './run-read.ts';

/** Where a look at idle runs goes on from: after this run (its `updated_at` as PostgreSQL's text, to the microsecond). */
export interface IdleRunCursor {
  updatedAt: string;
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
  localExecutionTimeoutSeconds?: number;
}

const IDLE_PAGE_SIZE = 500;
/** No limit on attempts: the largest value of `attempts` (an int). */
const ANY_ATTEMPTS = 2_147_483_647;
const IDLE_PAGES_PER_PASS = 20;

/** Runs that can still have open results: `runs_unfinished_idx`'s predicate, word for word, so that a query stating it can read that index. */
const UNFINISHED_RUN = `status not in ('applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled')`;

/**
 * The results of the runs in flight, reached through the unfinished runs' index: no index on
 * task_results mentions a status or a deadline (an index that did would cost every start and every
 * close new entries in all of task_results' indexes), and a result can be open with a deadline only
 * while its run is unfinished (a run that ends cancels its open results, or has none left). So each
 * pass reads what is in flight, however many finished results there are (test/plans.int.test.ts).
 */
const IN_FLIGHT_RESULTS = `runs r join task_stages ts on ts.run_id = r.id join task_results tr on tr.task_stage_id = ts.id
  where r.${UNFINISHED_RUN}`;

const sqlText = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/** Of a due result (`tr`) whose request was never acknowledged, the error of its last attempt (`last`) when that one never reached the task server. */
const UNDELIVERED = `tr.acknowledged_at is null and last.error_kind in (${[...UNDELIVERABLE_ERROR_KINDS].map(sqlText).join(', ')})`;

/** "The run task request was never delivered (2 attempts): the connection was refused." */
const UNDELIVERED_MESSAGE = `'The run task request was never delivered (' || tr.attempts || case when tr.attempts = 1 then ' attempt): ' else ' attempts): ' end ||
  case last.error_kind ${[...UNDELIVERABLE_ERROR_KINDS].map((kind) => `when ${sqlText(kind)} then ${sqlText(`${DELIVERY_ERROR_DESCRIPTIONS[kind]}.`)}`).join(' ')} end`;

/**
 * Ends the due results `from` names (a FROM clause ending in a WHERE condition): past their progress
 * deadline or hard deadline. One whose request never reached its task server (its last attempt was
 * refused, unresolvable, blocked…, and none was acknowledged) ends `unreachable` with that error, like any
 * request that could not be delivered; any other (delivered, then quiet) `errored`. One conditional
 * update, so a callback racing the deadline and this agree on exactly one terminal transition. Returns
 * their runs.
 */
const expireSql = (from: string): string => `with due as (
       -- Locked in id order (then their stages, by the trigger), so two passes over the same results never deadlock.
       select tr.id from ${from}
          and tr.status in ('pending', 'running') and ${PAST_DEADLINE}
        order by tr.id for update of tr),
     ending as (
       select due.id, case when ${UNDELIVERED} then 'unreachable' else 'errored' end as status,
              case when ${UNDELIVERED} then ${UNDELIVERED_MESSAGE}
                   when ${PAST_HARD_DEADLINE} then 'The run task ran longer than its maximum runtime.'
                   else 'The run task sent no progress within its progress timeout.' end as message
         from due join task_results tr on tr.id = due.id
         left join lateral (select da.error_kind from delivery_attempts da where da.task_result_id = due.id
                             order by da.attempt desc limit 1) last on true),
     expired as (
       update task_results tr set ${resultTransition({ status: 'ending.status', keys: [`ending.status || '-at'`], keep: 'latest', alias: 'tr' })},
              message = ending.message
         from ending where tr.id = ending.id and tr.status in ('pending', 'running')
        returning tr.task_stage_id)
     select distinct ts.run_id from expired e join task_stages ts on ts.id = e.task_stage_id`;

/** The sweeper's: every due result of the runs in flight. */
export const EXPIRE_IN_FLIGHT_SQL = expireSql(IN_FLIGHT_RESULTS);
/** The stages' results, by the index on (task_stage_id, task_id) (test/plans.int.test.ts checks the plan). */
export const EXPIRE_IN_STAGES_SQL = expireSql('task_results tr where tr.task_stage_id = any($1::text[])');
const EXPIRE_ONE_SQL = expireSql('task_results tr where tr.id = $1');

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
 * Results of the runs in flight whose next delivery attempt is overdue by $1 seconds (their delayed job
 * was lost, or the worker that leased the attempt died) and that may still be attempted: fewer than $2
 * attempts made. One whose last attempt's worker died cannot be claimed again and waits for its progress
 * deadline; left in this list, it would take a place before the others, every pass, until then.
 */
export const OVERDUE_DELIVERIES_SQL = `select tr.id, tr.attempts from ${IN_FLIGHT_RESULTS}
        and tr.status = 'running' and tr.acknowledged_at is null and tr.next_attempt_at < now() - make_interval(secs => $1)
        and tr.attempts < $2
      order by tr.next_attempt_at limit 500`;

/**
 * The unfinished runs untouched for $1 seconds, a page ($5 of them) at a time, oldest first, after the
 * cursor ($2 and $3 its `updated_at`, $4 its id; `updated_at >= $2` is what lets the index scan start there). Its
 * condition on `status` is the predicate of `runs_unfinished_idx`, so PostgreSQL reads that index (the
 * unfinished runs, oldest first) and never the finished runs, however many there are
 * (test/plans.int.test.ts checks the plan).
 */
export const IDLE_RUNS_SQL = `select id, updated_at::text as cursor_at from runs
      where ${UNFINISHED_RUN} and updated_at < now() - make_interval(secs => $1)
        and updated_at >= $2::timestamptz and (updated_at, id) > ($3::timestamptz, $4::text)
      order by updated_at, id limit $5`;

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
    const from = cursor?.updatedAt ?? '-infinity';
    const { rows } = await pool.query<{ id: string; cursor_at: string }>(IDLE_RUNS_SQL, [
      graceSeconds,
      from,
      from,
      cursor?.id ?? '',
      pageSize,
    ]);
    const seen = rows.map((row) => row.id);
    runIds.push(...(await runsThatMayMove(em, seen, options.localExecutionTimeoutSeconds)));
    const last = rows.at(-1);
    // A short page was the last one: the next pass starts again from the oldest.
    if (!last || rows.length < pageSize) return { runIds, cursor: undefined };
    cursor = { updatedAt: last.cursor_at, id: last.id };
  }
  return { runIds, cursor };
}

/**
 * The safety net that makes Redis optional for correctness: deadlines live in PostgreSQL, and this
 * periodic pass ends expired results and re-drives whatever a lost job left behind.
 */
export async function sweep(em: EntityManager, graceSeconds: number, options: SweepOptions = {}): Promise<SweepResult> {
  const expired = await expireResults(em);
  const { rows: overdue } = await (
    await nativePool(em)
  ).query<{ id: string; attempts: number }>(OVERDUE_DELIVERIES_SQL, [graceSeconds, options.maxAttempts ?? ANY_ATTEMPTS]);
  const idle = await idleRunsThatMayMove(em, graceSeconds, options);
  const runIds = [...new Set([...expired, ...idle.runIds])];
  return { runIds, resultIds: overdue.map((row) => ({ id: row.id, attempt: row.attempts + 1 })), idleCursor: idle.cursor };
}
