import { DB_NOW_ISO, inTransaction, isDeadlock, newId, prepared, runPrepared, unauthorized, type Queryable } from '@runtasks/shared';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { currentCallbackRefusal } from '../auth/authenticate.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { columnList, TASK_RESULT_COLUMNS, taskResultFromRow, type TaskResultRow } from '../serializers/rows.ts';
import { serializeTaskResult } from '../serializers/task-stage.serializer.ts';
import { respond, type RouteDef } from './define.ts';
import { characters, safeText } from './schemas.ts';

const tagValue = z.object({ label: safeText(256), level: z.enum(['none', 'info', 'warning', 'error']).optional() });

/** Outcome attributes as HCP documents them; `outcome_id` is the JSON schema's spelling. */
const outcomeAttributes = z
  .object({
    'outcome-id': safeText(255).optional(),
    outcome_id: safeText(255).optional(),
    description: characters(1000).nullable().optional(),
    body: safeText(5 * 1024 * 1024)
      .nullable()
      .optional(),
    url: safeText(2048).nullable().optional(),
    tags: z.record(safeText(256), z.array(tagValue).max(100)).optional(),
  })
  .refine((outcome) => (outcome['outcome-id'] ?? outcome.outcome_id) !== undefined, 'outcome-id is required');

/** Current form `{type, attributes}`, or the older flat objects in `attributes.outcomes`. */
const outcome = z.union([z.object({ type: z.string().optional(), attributes: outcomeAttributes }), outcomeAttributes]);
const outcomeList = z.object({ data: z.array(outcome).max(250) });

const callbackSchema = z.object({
  data: z.object({
    type: z.enum(['task-results', 'task_results'], { error: 'must be "task-results"' }),
    attributes: z.object({
      status: z.enum(['running', 'passed', 'failed'], { error: 'must be one of running, passed, failed' }),
      message: characters(10_000).nullable().optional(),
      url: safeText(2048).nullable().optional(),
      outcomes: z.array(outcome).max(250).optional(),
    }),
    // relationships.outcomes (go-tfe v1), relationships.task-result-outcomes (the OpenAPI spec).
    relationships: z.object({ outcomes: outcomeList.optional(), 'task-result-outcomes': outcomeList.optional() }).optional(),
  }),
});

type OutcomeInput = z.output<typeof outcome>;

const flatten = (item: OutcomeInput): z.output<typeof outcomeAttributes> => ('attributes' in item ? item.attributes : item);

/**
 * A callback in one statement (one round trip, atomic without an explicit transaction when there are
 * no outcomes). Only its own result's row is locked (by the update, which rechecks the row's newest
 * version): whether this verdict closed the stage, and then the run's wake-up, is the business of the
 * task_results trigger, which counts the stage's open results on the stage row (see TaskResult).
 * $1 result id, $2 token hash, $3 status, $4 message, $5 url, $6 progress timeout (s), $7 outcomes.
 * Past its progress deadline a result takes no callback (the sweeper or its deadline job ends it as
 * errored). No row means the callback was refused, which is rare: why is read afterwards
 * (currentCallbackRefusal) rather than by every callback. The token's hash is compared as an
 * expression so that only the primary key can find the row: its unique index could too, and a generic
 * plan may pick either, but the primary key's pages are the ones every statement on results keeps warm
 * (test/plans.int.test.ts). No hash is empty.
 */
export const CALLBACK = prepared(
  'callback',
  `update task_results tr set status = $3::text,
          message = coalesce($4::text, tr.message), url = coalesce($5::text, tr.url),
          status_timestamps = case when (tr.status_timestamps ->> ($3::text || '-at')) is not null then tr.status_timestamps
                                   else tr.status_timestamps || jsonb_build_object($3::text || '-at', ${DB_NOW_ISO}) end,
          progress_deadline = case when $3::text = 'running'
                                   then least(now() + make_interval(secs => $6::double precision), coalesce(tr.hard_deadline, 'infinity'))
                                   else tr.progress_deadline end,
          outcomes_count = tr.outcomes_count + $7::int, version = tr.version + 1, updated_at = now()
    where tr.id = $1 and coalesce(tr.callback_token_hash, '') = $2 and tr.status in ('pending', 'running')
      and (tr.hard_deadline is null or tr.hard_deadline > now()) and (tr.progress_deadline is null or tr.progress_deadline > now())
   returning ${columnList(TASK_RESULT_COLUMNS, 'tr')}`,
);

const OUTCOME_COLUMNS = `(id, task_result_id, outcome_id, description, body, url, tags, created_at)`;

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

async function insertOutcomes(client: Queryable, resultId: string, outcomes: OutcomeInput[]): Promise<void> {
  if (outcomes.length === 0) return;
  const rows = outcomes.map(flatten);
  // One statement for all of them; clock_timestamp() keeps their order (the list is read ordered by it).
  const values = rows.map((_, index) => {
    const at = index * 7;
    return `($${at + 1}, $${at + 2}, $${at + 3}, $${at + 4}, $${at + 5}, $${at + 6}, $${at + 7}::jsonb, clock_timestamp())`;
  });
  await client.query(
    `insert into task_result_outcomes ${OUTCOME_COLUMNS} values ${values.join(', ')}`,
    rows.flatMap((item) => [
      newId('taskResultOutcome'),
      resultId,
      item['outcome-id'] ?? item.outcome_id,
      item.description ?? null,
      item.body ?? null,
      item.url ?? null,
      JSON.stringify(item.tags ?? {}),
    ]),
  );
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
  const outcomes = [
    ...(relationships?.outcomes?.data ?? []),
    ...(relationships?.['task-result-outcomes']?.data ?? []),
    ...(attributes.outcomes ?? []),
  ];
  const status = attributes.status;
  const values = [
    resultId,
    tokenHash,
    status,
    attributes.message ?? null,
    attributes.url ?? null,
    ctx.deps.config.taskProgressTimeoutSeconds,
    outcomes.length,
  ];
  const apply = async (client: Queryable): Promise<TaskResultRow> => {
    const [row] = await runPrepared<TaskResultRow>(client, CALLBACK, values);
    // Refused: final, past a deadline, or not this token's (401) — as the database has the row now.
    if (!row) throw (await currentCallbackRefusal(client, resultId, tokenHash)) ?? unauthorized();
    await insertOutcomes(client, resultId, outcomes);
    return row;
  };
  const pool = await poolOf(ctx);
  // Without outcomes the statement is the whole change; with them, they commit with it or not at all.
  const updated = await withDeadlockRetry(() => (outcomes.length === 0 ? apply(pool) : inTransaction(pool, apply)));
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
