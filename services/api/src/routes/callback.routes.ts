import type { EntityManager } from '@mikro-orm/postgresql';
import { DeadlockException } from '@mikro-orm/core';
import { conflict, DB_NOW_ISO, JOBS, newId, OUTBOX_CHANNEL, TaskResult, unauthorized } from '@runtasks/shared';
import { z } from 'zod';
import { bearerToken } from '../auth/authenticate.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
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

/** The result as the callback statement left it (its columns), with what the statement saw. */
type CallbackRow = Record<string, unknown> & {
  'callback.status': string;
  'callback.expired': boolean;
  id: string | null;
};

/**
 * A callback in one statement (one round trip, atomic without an explicit transaction when there are
 * no outcomes). Every result of the stage is locked in id order: FOR UPDATE returns each row's newest
 * committed version, so a stage's last verdict sees every other one however close together they arrive
 * (they take turns on these locks), and exactly that one records the run's wake-up. Earlier verdicts
 * cannot let the run move; a result that ends another way (a deadline, the dispatcher) wakes the run itself.
 */
const CALLBACK_SQL = `
with target as (
  select tr.task_stage_id, ts.run_id from task_results tr join task_stages ts on ts.id = tr.task_stage_id
   where tr.id = ? and tr.callback_token_hash = ?),
siblings as (
  select s.id, s.status, (s.hard_deadline is not null and s.hard_deadline <= now()) as expired
    from task_results s where s.task_stage_id = (select task_stage_id from target) order by s.id for update),
updated as (
  update task_results tr set status = ?,
         message = coalesce(?, tr.message), url = coalesce(?, tr.url),
         status_timestamps = case when (tr.status_timestamps ->> ?::text) is not null then tr.status_timestamps
                                  else tr.status_timestamps || jsonb_build_object(?::text, ${DB_NOW_ISO}) end,
         progress_deadline = case when ? = 'running' then least(now() + make_interval(secs => ?), coalesce(tr.hard_deadline, 'infinity'))
                                  else tr.progress_deadline end,
         outcomes_count = tr.outcomes_count + ?, version = tr.version + 1, updated_at = now()
    from siblings me
   where tr.id = ? and me.id = tr.id and me.status in ('pending', 'running') and not me.expired
  returning tr.*),
event as (
  insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
  select ?, t.run_id, jsonb_build_object('runId', t.run_id), now(), 0 from target t
   where ? <> 'running' and exists (select 1 from updated)
     and not exists (select 1 from siblings s where s.id <> ? and s.status in ('pending', 'running'))
  returning aggregate_id),
notified as (select pg_notify(?, aggregate_id) from event)
select me.status as "callback.status", me.expired as "callback.expired", (select count(*) from notified) as "callback.woke", u.*
  from target t join siblings me on me.id = ? left join updated u on true`;

/** Deadlocks are resolved by PostgreSQL aborting one side; the callback's statement is safe to repeat. */
const DEADLOCK_ATTEMPTS = 3;

async function withDeadlockRetry<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof DeadlockException) || attempt >= DEADLOCK_ATTEMPTS) throw error;
    }
  }
}

async function insertOutcomes(tx: EntityManager, resultId: string, outcomes: OutcomeInput[]): Promise<void> {
  if (outcomes.length === 0) return;
  const rows = outcomes.map(flatten);
  // One statement for all of them; clock_timestamp() keeps their order (the list is read ordered by it).
  await tx.execute(
    `insert into task_result_outcomes (id, task_result_id, outcome_id, description, body, url, tags, created_at)
     values ${rows.map(() => '(?, ?, ?, ?, ?, ?, ?::jsonb, clock_timestamp())').join(', ')}`,
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
  const params = [
    resultId,
    ctx.deps.secrets.hashToken(token),
    status,
    attributes.message ?? null,
    attributes.url ?? null,
    `${status}-at`,
    `${status}-at`,
    status,
    ctx.deps.config.taskProgressTimeoutSeconds,
    outcomes.length,
    resultId,
    JOBS.runAdvance,
    status,
    resultId,
    OUTBOX_CHANNEL,
    resultId,
  ];
  const apply = async (em: EntityManager): Promise<Record<string, unknown>> => {
    const [row] = await em.execute<CallbackRow[]>(CALLBACK_SQL, params);
    if (!row) throw unauthorized();
    if (row.id === null) throw refusal(row['callback.status'], row['callback.expired']) ?? unauthorized();
    await insertOutcomes(em, resultId, outcomes);
    const { 'callback.status': _status, 'callback.expired': _expired, 'callback.woke': _woke, ...columns } = row;
    return columns;
  };
  const em = ctx.state.em.fork();
  // Without outcomes the statement is the whole change; with them, they commit with it or not at all.
  const updated = await withDeadlockRetry(() => (outcomes.length === 0 ? apply(em) : em.transactional((tx) => apply(tx))));
  respond(ctx, 200, single(serializeTaskResult(em.map(TaskResult, updated))));
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
