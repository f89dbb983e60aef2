import {
  conflict,
  DB_NOW_ISO,
  inTransaction,
  isDeadlock,
  JOBS,
  nativePool,
  newId,
  OUTBOX_CHANNEL,
  prepared,
  runPrepared,
  unauthorized,
  type Queryable,
} from '@runtasks/shared';
import { z } from 'zod';
import { bearerToken } from '../auth/authenticate.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { columnList, TASK_RESULT_COLUMNS, taskResultFromRow, type Absent, type TaskResultRow } from '../serializers/rows.ts';
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

/** The result as the callback statement left it (null columns when it did not change it), with what the statement saw. */
type CallbackRow = (TaskResultRow | Absent<TaskResultRow>) & {
  locked_status: string;
  locked_expired: boolean;
};

/**
 * A callback in one statement (one round trip, atomic without an explicit transaction when there are
 * no outcomes). Every result of the stage is locked in id order: FOR UPDATE returns each row's newest
 * committed version, so a stage's last verdict sees every other one however close together they arrive
 * (they take turns on these locks), and exactly that one records the run's wake-up. Earlier verdicts
 * cannot let the run move; a result that ends another way (a deadline, the dispatcher) wakes the run itself.
 * $1 result id, $2 token hash, $3 status, $4 message, $5 url, $6 progress timeout (s), $7 outcomes,
 * $8 the wake-up's topic, $9 the NOTIFY channel. `woke` is selected so that `notified` runs: a plain
 * SELECT in WITH runs only when something reads it.
 */
const CALLBACK = prepared(
  'callback',
  `with target as (
     select tr.task_stage_id, ts.run_id from task_results tr join task_stages ts on ts.id = tr.task_stage_id
      where tr.id = $1 and tr.callback_token_hash = $2),
   siblings as (
     select s.id, s.status, (s.hard_deadline is not null and s.hard_deadline <= now()) as expired
       from task_results s where s.task_stage_id = (select task_stage_id from target) order by s.id for update),
   updated as (
     update task_results tr set status = $3::text,
            message = coalesce($4::text, tr.message), url = coalesce($5::text, tr.url),
            status_timestamps = case when (tr.status_timestamps ->> ($3::text || '-at')) is not null then tr.status_timestamps
                                     else tr.status_timestamps || jsonb_build_object($3::text || '-at', ${DB_NOW_ISO}) end,
            progress_deadline = case when $3::text = 'running'
                                     then least(now() + make_interval(secs => $6::double precision), coalesce(tr.hard_deadline, 'infinity'))
                                     else tr.progress_deadline end,
            outcomes_count = tr.outcomes_count + $7::int, version = tr.version + 1, updated_at = now()
       from siblings me
      where tr.id = $1 and me.id = tr.id and me.status in ('pending', 'running') and not me.expired
     returning ${columnList(TASK_RESULT_COLUMNS, 'tr')}),
   event as (
     insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
     select $8::text, t.run_id, jsonb_build_object('runId', t.run_id), now(), 0 from target t
      where $3::text <> 'running' and exists (select 1 from updated)
        and not exists (select 1 from siblings s where s.id <> $1 and s.status in ('pending', 'running'))
     returning aggregate_id),
   notified as (select pg_notify($9::text, aggregate_id) from event)
   select me.status as locked_status, me.expired as locked_expired, (select count(*) from notified) as woke,
          ${columnList(TASK_RESULT_COLUMNS, 'u')}
     from target t join siblings me on me.id = $1 left join updated u on true`,
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

/** Why a callback may not change its result now, or nothing when it may. */
function refusal(status: string, expired: boolean): Error | undefined {
  if (status !== 'pending' && status !== 'running')
    return conflict(`The task result is already ${status}; it cannot change.`, 'transition not allowed');
  if (expired) return unauthorized();
  return undefined;
}

/**
 * `PATCH /task-results/:id/callback`: the task server reports progress (`running`) or its verdict.
 * Authorized by the result's own access token only; a final result never changes again (409).
 * Callbacks may arrive before our POST has returned: the result is `running` before it is sent.
 */
async function callback(ctx: ApiContext): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  const access = ctx.state.callbackAccess;
  if (!token || !access) throw unauthorized();
  // Checked before the body is read, as the statement below checks again under its locks.
  const refused = refusal(access.status, access.expired);
  if (refused) throw refused;
  const resultId = access.resultId;
  const { attributes, relationships } = parseWith(callbackSchema, ctx.request.body).data;
  const outcomes = [
    ...(relationships?.outcomes?.data ?? []),
    ...(relationships?.['task-result-outcomes']?.data ?? []),
    ...(attributes.outcomes ?? []),
  ];
  const status = attributes.status;
  const values = [
    resultId,
    ctx.deps.secrets.hashToken(token),
    status,
    attributes.message ?? null,
    attributes.url ?? null,
    ctx.deps.config.taskProgressTimeoutSeconds,
    outcomes.length,
    JOBS.runAdvance,
    OUTBOX_CHANNEL,
  ];
  const apply = async (client: Queryable): Promise<TaskResultRow> => {
    const [row] = await runPrepared<CallbackRow>(client, CALLBACK, values);
    if (!row) throw unauthorized();
    if (row.id === null) throw refusal(row.locked_status, row.locked_expired) ?? unauthorized();
    await insertOutcomes(client, resultId, outcomes);
    return row;
  };
  const pool = await nativePool(ctx.state.em);
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
