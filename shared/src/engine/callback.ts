import { setTimeout as sleep } from 'node:timers/promises';
import { isDeadlock, prepared, runPrepared, type PreparedStatement, type Queryable } from '../db/prepared.ts';
import { callbackProgressDeadline, WITHIN_DEADLINES } from './deadlines.ts';
import { resultTransition } from './transitions.ts';

/**
 * A callback in one statement (one round trip, atomic without an explicit transaction), its outcomes
 * included, returning `returning` (the result's columns, of `tr`). Only its own result's row is locked
 * (by the update, which rechecks the row's newest version): whether this verdict closed the stage, and
 * then the run's wake-up, is the business of the task_results trigger (stage-count-trigger.ts).
 * $1 result id, $2 token hash, $3 status, $4 message, $5 url, $6 progress timeout (s),
 * $7 outcomes added, $8 their bodies' bytes, $9 outcomes a result may keep, $10 bytes it may keep,
 * $11 … $16 the outcomes' columns as arrays (ids, outcome ids, descriptions, bodies, urls, tags).
 * The caps are checked by the update that counts the outcomes, under the row lock, and the outcomes are
 * added only when it did: two callbacks at once cannot both pass a cap that only one of them fits.
 * Past a deadline a result takes no callback (the sweeper or its deadline job ends it). No row means
 * the callback was refused. The token's hash is compared as an expression so that only the primary
 * key can find the row: a generic plan could otherwise pick the token's unique index, whose pages are
 * not the ones every statement on results keeps warm (test/plans.int.test.ts). No hash is empty.
 * clock_timestamp() keeps the outcomes' order (the list is read ordered by it).
 *
 * Two statements: with outcomes, and (`plain`) without, $1 … $10 only. Most callbacks carry none, and
 * a statement that may insert them sets up that insert at every execution whether it inserts or not
 * (opening the outcomes' table and its indexes, the unnest, the foreign key): the plain one is the
 * update alone.
 */
export function prepareCallback(returning: string): { withOutcomes: PreparedStatement; plain: PreparedStatement } {
  const update = `update task_results tr set ${resultTransition({ status: '$3::text', keys: [`$3::text || '-at'`], alias: 'tr' })},
          message = coalesce($4::text, tr.message), url = coalesce($5::text, tr.url),
          ${callbackProgressDeadline('$3::text', '$6')},
          outcomes_count = tr.outcomes_count + $7::int, outcomes_bytes = tr.outcomes_bytes + $8::int
    where tr.id = $1 and coalesce(tr.callback_token_hash, '') = $2 and tr.status in ('pending', 'running') and ${WITHIN_DEADLINES}
      and tr.outcomes_count + $7::int <= $9::int and tr.outcomes_bytes + $8::int <= $10::int
   returning ${returning}`;
  return {
    withOutcomes: prepared(
      'callback',
      `with updated as (
     ${update}),
   added as (
     insert into task_result_outcomes (id, task_result_id, outcome_id, description, body, url, tags, created_at)
     select o.id, $1, o.outcome_id, o.description, o.body, o.url, o.tags::jsonb, clock_timestamp()
       from unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[])
            with ordinality as o(id, outcome_id, description, body, url, tags, position)
      where exists (select 1 from updated)
      order by o.position)
   select * from updated`,
    ),
    plain: prepared('callback-plain', update),
  };
}

/** Deadlocks are resolved by PostgreSQL aborting one side; the callback's statement is safe to repeat. */
const DEADLOCK_ATTEMPTS = 3;

/**
 * Runs a callback's statement (prepareCallback's), retried where PostgreSQL broke a deadlock by
 * aborting it. Returns the result as the callback left it, or undefined where it was refused.
 */
export async function recordCallback<T extends object>(
  db: Queryable,
  statement: PreparedStatement,
  values: readonly unknown[],
): Promise<T | undefined> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const [row] = await runPrepared<T>(db, statement, values);
      return row;
    } catch (error) {
      if (!isDeadlock(error) || attempt >= DEADLOCK_ATTEMPTS) throw error;
      // The other side goes on as soon as this one is aborted; retried at once, this one can take the
      // same first lock again before it does and close the same cycle. A short, jittered pause lets it pass.
      await sleep(attempt * (10 + Math.random() * 20));
    }
  }
}
