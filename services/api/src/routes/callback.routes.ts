import {
  ApiError,
  DB_NOW_ISO,
  isDeadlock,
  newId,
  OUTCOME_LIMITS,
  outcomeLimitBreach,
  prepared,
  runPrepared,
  unauthorized,
  type Queryable,
} from '@runtasks/shared';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { currentCallbackRefusal } from '../auth/authenticate.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { columnList, TASK_RESULT_COLUMNS, taskResultFromRow, type TaskResultRow } from '../serializers/rows.ts';
import { serializeTaskResult } from '../serializers/task-stage.serializer.ts';
import { respond, type RouteDef } from './define.ts';
import { characters, linkUrl, safeText } from './schemas.ts';

const tagValue = z.object({ label: safeText(256), level: z.enum(['none', 'info', 'warning', 'error']).optional() });

/** Outcome attributes as HCP documents them; `outcome_id` is the JSON schema's spelling. */
const outcomeAttributes = z
  .object({
    'outcome-id': safeText(255).optional(),
    outcome_id: safeText(255).optional(),
    description: characters(1000).nullable().optional(),
    body: safeText(OUTCOME_LIMITS.bodyCharacters).nullable().optional(),
    url: linkUrl.nullable().optional(),
    tags: z.record(safeText(256), z.array(tagValue).max(100)).optional(),
  })
  .refine((outcome) => (outcome['outcome-id'] ?? outcome.outcome_id) !== undefined, 'outcome-id is required');

/** Current form `{type, attributes}`, or the older flat objects in `attributes.outcomes`. */
const outcome = z.union([z.object({ type: z.string().optional(), attributes: outcomeAttributes }), outcomeAttributes]);
const outcomeList = z.object({ data: z.array(outcome).max(OUTCOME_LIMITS.perCallback) });

const callbackSchema = z.object({
  data: z.object({
    type: z.enum(['task-results', 'task_results'], { error: 'must be "task-results"' }),
    attributes: z.object({
      status: z.enum(['running', 'passed', 'failed'], { error: 'must be one of running, passed, failed' }),
      message: characters(10_000).nullable().optional(),
      url: linkUrl.nullable().optional(),
      outcomes: z.array(outcome).max(OUTCOME_LIMITS.perCallback).optional(),
    }),
    // relationships.outcomes (go-tfe v1), relationships.task-result-outcomes (the OpenAPI spec).
    relationships: z.object({ outcomes: outcomeList.optional(), 'task-result-outcomes': outcomeList.optional() }).optional(),
  }),
});

type OutcomeInput = z.output<typeof outcome>;

const flatten = (item: OutcomeInput): z.output<typeof outcomeAttributes> => ('attributes' in item ? item.attributes : item);

/**
 * A callback in one statement (one round trip, atomic without an explicit transaction), its outcomes
 * included. Only its own result's row is locked (by the update, which rechecks the row's newest
 * version): whether this verdict closed the stage, and then the run's wake-up, is the business of the
 * task_results trigger, which counts the stage's open results on the stage row (see TaskResult).
 * $1 result id, $2 token hash, $3 status, $4 message, $5 url, $6 progress timeout (s),
 * $7 outcomes added, $8 their bodies' bytes, $9 outcomes a result may keep, $10 bytes it may keep,
 * $11 … $16 the outcomes' columns as arrays (ids, outcome ids, descriptions, bodies, urls, tags).
 * The caps are checked by the update that counts the outcomes, under the row lock, and the outcomes are
 * added only when it did: two callbacks at once cannot both pass a cap that only one of them fits.
 * Past its progress deadline a result takes no callback (the sweeper or its deadline job ends it as
 * errored). No row means the callback was refused, which is rare: why is read afterwards
 * (currentCallbackRefusal, then the caps) rather than by every callback. The token's hash is compared as
 * an expression so that only the primary key can find the row: its unique index could too, and a
 * generic plan may pick either, but the primary key's pages are the ones every statement on results
 * keeps warm (test/plans.int.test.ts). No hash is empty. A `running` callback moves the progress
 * deadline on, never past the hard deadline. clock_timestamp() keeps the outcomes' order (the list is
 * read ordered by it).
 */
export const CALLBACK = prepared(
  'callback',
  `with updated as (
     update task_results tr set status = $3::text,
          message = coalesce($4::text, tr.message), url = coalesce($5::text, tr.url),
          status_timestamps = case when (tr.status_timestamps ->> ($3::text || '-at')) is not null then tr.status_timestamps
                                   else tr.status_timestamps || jsonb_build_object($3::text || '-at', ${DB_NOW_ISO}) end,
          progress_deadline = case when $3::text = 'running'
                                   then least(now() + make_interval(secs => $6::double precision), coalesce(tr.hard_deadline, 'infinity'))
                                   else tr.progress_deadline end,
          outcomes_count = tr.outcomes_count + $7::int, outcomes_bytes = tr.outcomes_bytes + $8::int,
          version = tr.version + 1, updated_at = now()
    where tr.id = $1 and coalesce(tr.callback_token_hash, '') = $2 and tr.status in ('pending', 'running')
      and (tr.hard_deadline is null or tr.hard_deadline > now()) and (tr.progress_deadline is null or tr.progress_deadline > now())
      and tr.outcomes_count + $7::int <= $9::int and tr.outcomes_bytes + $8::int <= $10::int
   returning ${columnList(TASK_RESULT_COLUMNS, 'tr')}),
   added as (
     insert into task_result_outcomes (id, task_result_id, outcome_id, description, body, url, tags, created_at)
     select o.id, $1, o.outcome_id, o.description, o.body, o.url, o.tags::jsonb, clock_timestamp()
       from unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[])
            with ordinality as o(id, outcome_id, description, body, url, tags, position)
      where exists (select 1 from updated)
      order by o.position)
   select * from updated`,
);

const OUTCOME_AMOUNT = prepared(
  'callback-outcome-amount',
  'select outcomes_count, outcomes_bytes from task_results where id = $1 and callback_token_hash = $2',
);

/** Deadlocks are resolved by PostgreSQL aborting one side; the callback's statement is safe to repeat. */
const DEADLOCK_ATTEMPTS = 3;

async function withDeadlockRetry<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      if (!isDeadlock(error) || attempt >= DEADLOCK_ATTEMPTS) throw error;
      // The other side goes on as soon as this one is aborted; retried at once, this one can take the
      // same first lock again before it does and close the same cycle. A short, jittered pause lets it pass.
      await sleep(attempt * (10 + Math.random() * 20));
    }
  }
}

/** The outcomes' columns as the statement's arrays ($11 … $16), in the order they were given. */
function outcomeColumns(outcomes: OutcomeInput[]): unknown[][] {
  const rows = outcomes.map(flatten);
  return [
    rows.map(() => newId('taskResultOutcome')),
    rows.map((item) => item['outcome-id'] ?? item.outcome_id),
    rows.map((item) => item.description ?? null),
    rows.map((item) => item.body ?? null),
    rows.map((item) => item.url ?? null),
    rows.map((item) => JSON.stringify(item.tags ?? {})),
  ];
}

const bodyBytes = (outcomes: OutcomeInput[]): number =>
  outcomes.reduce((sum, item) => sum + Buffer.byteLength(flatten(item).body ?? '', 'utf8'), 0);

/** A callback whose outcomes do not fit in one callback: 422 at the longest list, naming the limit. */
function assertFitsOneCallback(lists: [pointer: string, length: number][]): void {
  const total = lists.reduce((sum, [, length]) => sum + length, 0);
  if (total <= OUTCOME_LIMITS.perCallback) return;
  const [pointer] = lists.reduce((longest, list) => (list[1] > longest[1] ? list : longest));
  throw new ApiError(
    422,
    'too many outcomes',
    `A callback may carry at most ${OUTCOME_LIMITS.perCallback} outcomes across its lists; this one carries ${total}.`,
    { pointer },
  );
}

/** Why an open result refused the callback's outcomes (a cap), as the database has it now; undefined when it did not. */
async function outcomeRefusal(client: Queryable, resultId: string, tokenHash: string, adding: { count: number; bodyBytes: number }) {
  const [row] = await runPrepared<{ outcomes_count: number; outcomes_bytes: number }>(client, OUTCOME_AMOUNT, [resultId, tokenHash]);
  const breach = row && outcomeLimitBreach({ count: row.outcomes_count, bodyBytes: row.outcomes_bytes }, adding);
  return breach ? new ApiError(422, 'too many outcomes', breach, { pointer: '/data/relationships/outcomes/data' }) : undefined;
}

/**
 * `PATCH /task-results/:id/callback`: the task server reports progress (`running`) or its verdict.
 * Authorized by the result's own access token only; a final result never changes again (409).
 * Callbacks may arrive before our POST has returned: the result is `running` before it is sent.
 */
async function callback(ctx: ApiContext): Promise<void> {
  const access = ctx.state.callbackAccess;
  if (!access) throw unauthorized();
  const { resultId, tokenHash } = access;
  const { attributes, relationships } = parseWith(callbackSchema, ctx.request.body).data;
  const lists: [string, OutcomeInput[]][] = [
    ['/data/relationships/outcomes/data', relationships?.outcomes?.data ?? []],
    ['/data/relationships/task-result-outcomes/data', relationships?.['task-result-outcomes']?.data ?? []],
    ['/data/attributes/outcomes', attributes.outcomes ?? []],
  ];
  assertFitsOneCallback(lists.map(([pointer, list]) => [pointer, list.length]));
  const outcomes = lists.flatMap(([, list]) => list);
  const adding = { count: outcomes.length, bodyBytes: bodyBytes(outcomes) };
  const values = [
    resultId,
    tokenHash,
    attributes.status,
    attributes.message ?? null,
    attributes.url ?? null,
    ctx.deps.config.taskProgressTimeoutSeconds,
    adding.count,
    adding.bodyBytes,
    OUTCOME_LIMITS.perResult,
    OUTCOME_LIMITS.bodyBytesPerResult,
    ...outcomeColumns(outcomes),
  ];
  const pool = await poolOf(ctx);
  const updated = await withDeadlockRetry(async () => {
    const [row] = await runPrepared<TaskResultRow>(pool, CALLBACK, values);
    if (row) return row;
    // Refused: final, past a deadline, or not this token's (401), else over a cap — as the database has the row now.
    throw (
      (await currentCallbackRefusal(pool, resultId, tokenHash)) ??
      (await outcomeRefusal(pool, resultId, tokenHash, adding)) ??
      unauthorized()
    );
  });
  respond(ctx, 200, single(serializeTaskResult(taskResultFromRow(updated))));
}

export const callbackRoutes: RouteDef[] = [
  {
    method: 'PATCH',
    path: '/task-results/:task_result_id/callback',
    auth: 'callback',
    bodyLimit: '5mb',
    summary: 'Report progress or the verdict of a task result (task server callback)',
    requestSchema: callbackSchema,
    handler: callback,
  },
];
