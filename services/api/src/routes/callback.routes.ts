import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, DB_NOW_ISO, JOBS, newId, recordOutboxEvent, TaskResult, unauthorized } from '@runtasks/shared';
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

interface LockedResult {
  id: string;
  status: string;
  task_stage_id: string;
  run_id: string;
  expired: boolean;
}

async function insertOutcomes(tx: EntityManager, resultId: string, outcomes: OutcomeInput[]): Promise<void> {
  for (const item of outcomes.map(flatten)) {
    await tx.execute(
      `insert into task_result_outcomes (id, task_result_id, outcome_id, description, body, url, tags, created_at)
       values (?, ?, ?, ?, ?, ?, ?::jsonb, clock_timestamp())`,
      [
        newId('taskResultOutcome'),
        resultId,
        item['outcome-id'] ?? item.outcome_id,
        item.description ?? null,
        item.body ?? null,
        item.url ?? null,
        JSON.stringify(item.tags ?? {}),
      ],
    );
  }
  if (outcomes.length)
    await tx.execute(`update task_results set outcomes_count = outcomes_count + ? where id = ?`, [outcomes.length, resultId]);
}

/**
 * `PATCH /task-results/:id/callback`: the task server reports progress (`running`) or its verdict.
 * Authorized by the result's own access token only; a final result never changes again (409).
 * Callbacks may arrive before our POST has returned: the result is `running` before it is sent.
 */
async function callback(ctx: ApiContext): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (!token) throw unauthorized();
  const resultId = ctx.params['task_result_id'] ?? '';
  const progressTimeoutSeconds = ctx.deps.config.taskProgressTimeoutSeconds;
  // The row as this callback left it, for the response (read again only when outcomes changed it after).
  let updatedRow: Record<string, unknown> | undefined;
  await ctx.state.em.transactional(async (tx) => {
    // The stage is locked too: the final callbacks of one stage take turns, so the last one sees every
    // other result final and wakes the run (below), however close together they arrive.
    const [locked] = await tx.execute<LockedResult[]>(
      `select tr.id, tr.status, tr.task_stage_id, ts.run_id, (tr.hard_deadline is not null and tr.hard_deadline <= now()) as expired
         from task_results tr join task_stages ts on ts.id = tr.task_stage_id
        where tr.id = ? and tr.callback_token_hash = ? for update of tr, ts`,
      [resultId, ctx.deps.secrets.hashToken(token)],
    );
    if (!locked) throw unauthorized();
    if (locked.status !== 'pending' && locked.status !== 'running') {
      throw conflict(`The task result is already ${locked.status}; it cannot change.`, 'transition not allowed');
    }
    if (locked.expired) throw unauthorized();
    const { attributes, relationships } = parseWith(callbackSchema, ctx.request.body).data;
    const outcomes = [
      ...(relationships?.outcomes?.data ?? []),
      ...(relationships?.['task-result-outcomes']?.data ?? []),
      ...(attributes.outcomes ?? []),
    ];
    const status = attributes.status;
    const [updated] = await tx.execute<Record<string, unknown>[]>(
      `update task_results set status = ?,
              message = coalesce(?, message), url = coalesce(?, url),
              status_timestamps = case when (status_timestamps ->> ?::text) is not null then status_timestamps
                                       else status_timestamps || jsonb_build_object(?::text, ${DB_NOW_ISO}) end,
              progress_deadline = case when ? = 'running' then least(now() + make_interval(secs => ?), coalesce(hard_deadline, 'infinity'))
                                       else progress_deadline end,
              version = version + 1, updated_at = now()
        where id = ? returning *`,
      [
        status,
        attributes.message ?? null,
        attributes.url ?? null,
        `${status}-at`,
        `${status}-at`,
        status,
        progressTimeoutSeconds,
        resultId,
      ],
    );
    await insertOutcomes(tx, resultId, outcomes);
    updatedRow = outcomes.length === 0 ? updated : undefined;
    // Only the stage's last open result can let the run move: earlier verdicts wake no one (a deadline
    // or the sweeper wakes the run on its own when a result ends another way).
    if (status !== 'running') {
      await recordOutboxEvent(tx, JOBS.runAdvance, locked.run_id, {
        sql: `not exists (select 1 from task_results where task_stage_id = ? and status in ('pending', 'running'))`,
        params: [locked.task_stage_id],
      });
    }
  });
  const em = ctx.state.em.fork();
  const result = updatedRow ? em.map(TaskResult, updatedRow) : await em.findOneOrFail(TaskResult, { id: resultId });
  respond(ctx, 200, single(serializeTaskResult(result)));
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
