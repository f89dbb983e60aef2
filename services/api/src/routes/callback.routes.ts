import { ApiError, unauthorized } from '@runtasks/shared/errors';
import { newId, OUTCOME_LIMITS, outcomeLimitBreach, TAG_LEVELS } from '@runtasks/shared/domain';
import { prepared, runPrepared, type Queryable } from '@runtasks/shared/db';
import { prepareCallback, recordCallback } from '@runtasks/shared/engine';
import { z } from 'zod';
import { currentCallbackRefusal } from '../auth/authenticate.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { columnList, TASK_RESULT_COLUMNS, taskResultFromRow, type TaskResultRow } from '../serializers/rows.ts';
import { serializeTaskResult } from '../serializers/task-stage.serializer.ts';
import { respond, type RouteDef } from './define.ts';
import { characters, linkUrl, safeText } from './schemas.ts';

/**
 * What a task server sent instead of a level, briefly: a string quoted (cut at 40 characters), a list
 * or an object by its kind. Never the value whole: a deeply nested one overflows JSON.stringify (a 500).
 */
const sentInstead = (input: unknown): string => {
  if (typeof input === 'string') return JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input);
  if (Array.isArray(input)) return 'a list';
  return input !== null && typeof input === 'object' ? 'an object' : String(input);
};
const tagLevel = z.enum(TAG_LEVELS, {
  error: (issue) => `must be one of ${TAG_LEVELS.join(', ')}; got ${sentInstead(issue.input)}`,
});
const tagValue = z.object({ label: safeText(256), level: tagLevel.optional() });

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
  // Aborting: a union takes the verdict of the one member that did not abort, and a wrapped outcome
  // read as a flat one (its keys stripped) lacks an outcome-id, which would hide the real problem
  // (an unknown tag level, say) behind "outcome-id is required".
  .refine((outcome) => (outcome['outcome-id'] ?? outcome.outcome_id) !== undefined, { message: 'outcome-id is required', abort: true });

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

/** The engine's callback statements (prepareCallback: with outcomes, and plain), returning the result's columns as the API serializes them. */
export const CALLBACK = prepareCallback(columnList(TASK_RESULT_COLUMNS, 'tr'));

const OUTCOME_AMOUNT = prepared(
  'callback-outcome-amount',
  "select outcomes_count, outcomes_bytes from task_results where id = $1 and (callback_token_hash = $2 or (callback_token_hash is null and $2 = ''))",
);

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
  ];
  const pool = await poolOf(ctx);
  const updated =
    outcomes.length === 0
      ? await recordCallback<TaskResultRow>(pool, CALLBACK.plain, values)
      : await recordCallback<TaskResultRow>(pool, CALLBACK.withOutcomes, [...values, ...outcomeColumns(outcomes)]);
  // Refused: final, past a deadline, or not this token's (401), else over a cap — as the database has the row now.
  if (!updated)
    throw (
      (await currentCallbackRefusal(pool, resultId, tokenHash)) ??
      (await outcomeRefusal(pool, resultId, tokenHash, adding)) ??
      unauthorized()
    );
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
