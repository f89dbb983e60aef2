import { prepared } from '../db/prepared.ts';
import { DELIVERY_ERROR_DESCRIPTIONS, UNDELIVERABLE_ERROR_KINDS } from '../outbound/task-client.ts';
import { deadlineOutlasts, PAST_DEADLINE, PAST_HARD_DEADLINE } from './deadlines.ts';
import { IN_FLIGHT_RESULTS } from './runs.sql.ts';
import { DISPATCH_COLUMNS } from './task-payload.ts';
import { CANCELED, resultTransition } from './transitions.ts';

// The statements on task results of the dispatch and the sweeper (the callback's is callback.ts, the advance's advance-write.ts).

export const ATTEMPT_FIELDS = [
  'task_result_id',
  'attempt',
  'started_at',
  'duration_ms',
  'http_status',
  'error_kind',
  'response_excerpt',
] as const;
export const ATTEMPT_COLUMNS = `(${ATTEMPT_FIELDS.join(', ')})`;

/**
 * What an attempt's row says from its claim until its answer is recorded: the POST may be under way, or
 * its worker stopped (was killed) after making it. Every claimed attempt has its row, written by the
 * statement that claims it (no statement more), so every POST made has one; the answer fills it in.
 */
export const UNRECORDED_ATTEMPT = 'unrecorded';

/**
 * A CTE that writes the row of each attempt the CTE `claimed` (returning `id` and `attempts`) just
 * claimed, before its POST: started now, its answer not recorded yet. No ON CONFLICT: the claim counted
 * that attempt under the result's row lock, so no row can hold it yet (and a plain insert writes no
 * speculative-insertion record).
 */
export const recordClaimedAttempts = (claimed: string): string => `${claimed}_attempts as (
     insert into delivery_attempts ${ATTEMPT_COLUMNS}
     select ${claimed}.id, ${claimed}.attempts, now(), 0, null, '${UNRECORDED_ATTEMPT}', null from ${claimed})`;

/** An attempt's answer over the row its claim wrote (only that one: a duplicate never overwrites an answer). */
const FILL_IN_ATTEMPT = `on conflict (task_result_id, attempt) do update
       set started_at = excluded.started_at, duration_ms = excluded.duration_ms, http_status = excluded.http_status,
           error_kind = excluded.error_kind, response_excerpt = excluded.response_excerpt
     where delivery_attempts.error_kind = '${UNRECORDED_ATTEMPT}'`;

/** One attempt's answer ($1 … $7 its columns), as FILL_IN_ATTEMPT writes it. */
export const RECORD_ATTEMPT = `insert into delivery_attempts ${ATTEMPT_COLUMNS} values ($1, $2, $3, $4, $5, $6, $7) ${FILL_IN_ATTEMPT}`;

/**
 * $1 lease (s), $2 candidate token hash, $3 candidate token encrypted, $4 result id, $5 attempt cap.
 * Claimed only while the result is running and unacknowledged, when an attempt is due (next_attempt_at,
 * with a second for clock skew against a delayed job) and the cap is not reached.
 */
export const CLAIM = prepared(
  'dispatch-claim',
  `with claimed as (
   update task_results tr set attempts = tr.attempts + 1, next_attempt_at = now() + make_interval(secs => $1::double precision),
          callback_token_hash = case when tr.callback_token_encrypted is null then $2::text else tr.callback_token_hash end,
          callback_token_encrypted = coalesce(tr.callback_token_encrypted, $3::text)
     from task_stages ts
     join runs r on r.id = ts.run_id
     join workspaces w on w.id = r.workspace_id
     join organizations o on o.id = r.organization_id
    where tr.id = $4 and ts.id = tr.task_stage_id and tr.status = 'running' and tr.acknowledged_at is null
      and tr.next_attempt_at <= now() + interval '1 second' and tr.attempts < $5
   returning ${DISPATCH_COLUMNS}),
   ${recordClaimedAttempts('claimed')}
   select * from claimed`,
);

/**
 * $1 lease (s), $2 stage id. The first attempts of a stage the API started as it created the run: its
 * results still running, unacknowledged and never claimed (attempts 0). Locked in id order, as
 * everywhere, and leased as CLAIM leases, so a duplicated job claims nothing and a lost one leaves
 * results due now, which the sweeper re-drives through CLAIM.
 */
export const CLAIM_STARTED_AT_CREATION = prepared(
  'dispatch-claim-created',
  `with locked as (
     select id from task_results
      where task_stage_id = $2 and status = 'running' and acknowledged_at is null and attempts = 0 order by id for update),
   claimed as (
   update task_results tr set attempts = tr.attempts + 1, next_attempt_at = now() + make_interval(secs => $1::double precision)
     from locked, task_stages ts
     join runs r on r.id = ts.run_id
     join workspaces w on w.id = r.workspace_id
     join organizations o on o.id = r.organization_id
    where tr.id = locked.id and ts.id = tr.task_stage_id
   returning ${DISPATCH_COLUMNS}),
   ${recordClaimedAttempts('claimed')}
   select * from claimed`,
);

/**
 * Attempts' rows and their acknowledgements, any number in one statement (one round trip, one commit):
 * $1 … $7 arrays of the attempts' columns. Each answer fills in the row its claim wrote, by a plain
 * update (an upsert would lock that row and then update it: a record more in the WAL for each); an
 * attempt without such a row (claimed by a version that wrote none) is inserted, as RECORD_ATTEMPT does.
 * Results are locked in id order, as everywhere.
 */
export const ACKNOWLEDGE = prepared(
  'dispatch-acknowledge-many',
  `with given as (
     select * from unnest($1::text[], $2::int[], $3::timestamptz[], $4::int[], $5::int[], $6::text[], $7::text[])
       as g ${ATTEMPT_COLUMNS}),
   filled as (
     update delivery_attempts da
        set started_at = g.started_at, duration_ms = g.duration_ms, http_status = g.http_status, error_kind = g.error_kind,
            response_excerpt = g.response_excerpt
       from given g
      where da.task_result_id = g.task_result_id and da.attempt = g.attempt and da.error_kind = '${UNRECORDED_ATTEMPT}'
     returning da.task_result_id, da.attempt),
   attempt as (
     insert into delivery_attempts ${ATTEMPT_COLUMNS}
     select g.* from given g where not exists (select 1 from filled f where f.task_result_id = g.task_result_id and f.attempt = g.attempt)
     on conflict (task_result_id, attempt) do nothing),
   locked as (select id from task_results where id = any($1::text[]) and status = 'running' order by id for update)
   update task_results tr set acknowledged_at = now(), next_attempt_at = null, updated_at = now() from locked where tr.id = locked.id`,
);

/**
 * What follows an attempt applies only while the result is as this attempt left it: running, this
 * attempt its latest (a dispatcher that outlived its lease finds the re-drive's attempt there instead),
 * and not acknowledged. Otherwise an attempt that stalled past its lease could end, or reschedule, a
 * result that a later attempt delivered. The deadline is the row's own, as callbacks may have moved it.
 * $1 delay (s), $2 result id, $3 attempt.
 */
export const RETRY_LATER = `update task_results set next_attempt_at = now() + make_interval(secs => $1::double precision)
   where id = $2 and status = 'running' and attempts = $3 and acknowledged_at is null and ${deadlineOutlasts('$1::double precision')}`;

/** $1 status, $2 message, $3 its timestamp's key, $4 result id, $5 attempt (see RETRY_LATER). */
export const END_UNACKNOWLEDGED = `update task_results set ${resultTransition({ status: '$1', keys: ['$3::text'], keep: 'latest' })}, message = $2
    where id = $4 and status = 'running' and attempts = $5 and acknowledged_at is null`;

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
export const EXPIRE_ONE_SQL = expireSql('task_results tr where tr.id = $1');

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

/** A canceled or discarded run's open results, locked in id order (then their stages, by the trigger), as the sweeper locks them, so the two never deadlock. */
export const CANCEL_OPEN_RESULTS = `with open_results as (
     select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id
      where ts.run_id = $1 and tr.status in ('pending', 'running') order by tr.id for update of tr)
   update task_results tr set ${resultTransition({ ...CANCELED, alias: 'tr' })}
     from open_results where tr.id = open_results.id and tr.status in ('pending', 'running')`;
