import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { columnList, DeliveryAttempt, prepared, runPrepared, TaskResult, TaskResultOutcome } from '@runtasks/shared/db';
import { readableWorkspaceParams, readableWorkspaceSql, RUN_ROW, workspaceScope, type ScopeFilter } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseInclude } from '../http/include.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeDeliveryAttempt, serializeOutcome } from '../serializers/run-task.serializer.ts';
import { TASK_RESULT_COLUMNS, taskResultFromRow, type TaskResultRow } from '../serializers/rows.ts';
import { serializeTaskResult } from '../serializers/task-stage.serializer.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';

/** Results are readable by whoever may read the run's workspace runs; the scope joins in the same query. */
function readScope(ctx: ApiContext): ScopeFilter {
  const scope = workspaceScope(ctx.state.principal, 'runs:read');
  if (!scope) throw notFound();
  return { taskStage: { run: { workspace: scope } } };
}

async function findResult(ctx: ApiContext): Promise<TaskResult> {
  const where = { ...readScope(ctx), id: ctx.params['task_result_id'] ?? '' } as FilterQuery<TaskResult>;
  return orNotFound(await ctx.state.em.findOne(TaskResult, where));
}

/** Read for every poll of a result: one prepared statement, no unit of work. */
const READABLE_RESULT = prepared(
  'task-result-show',
  `select ${columnList(TASK_RESULT_COLUMNS, 'tr')}
     from task_results tr
     join task_stages ts on ts.id = tr.task_stage_id
     join runs r on r.id = ts.run_id
    where tr.id = $1 and ${readableWorkspaceSql(RUN_ROW, 2, 3)}`,
);

/** HCP documents no include for a task result (go-tfe's Read sends none): any asked for is a 400. */
const SHOW_INCLUDES = [] as const;

async function show(ctx: ApiContext): Promise<void> {
  parseInclude(ctx.query, SHOW_INCLUDES);
  const [row] = await runPrepared<TaskResultRow>(await poolOf(ctx), READABLE_RESULT, [
    ctx.params['task_result_id'] ?? '',
    ...readableWorkspaceParams(ctx.state.principal, 'runs:read'),
  ]);
  respond(ctx, 200, single(serializeTaskResult(taskResultFromRow(orNotFound(row)))));
}

async function listOutcomes(ctx: ApiContext): Promise<void> {
  const page = parsePage(ctx.query);
  const result = await findResult(ctx);
  const [outcomes, total] = await ctx.state.em.findAndCount(
    TaskResultOutcome,
    { taskResult: result.id },
    { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
  );
  respond(ctx, 200, collection(outcomes.map(serializeOutcome), page, total, publicRequestUrl(ctx)));
}

/** Every POST to the task server for this result: when, how long, and what came back (read-only). */
async function listDeliveryAttempts(ctx: ApiContext): Promise<void> {
  const page = parsePage(ctx.query);
  const result = await findResult(ctx);
  const [attempts, total] = await ctx.state.em.findAndCount(
    DeliveryAttempt,
    { taskResult: result.id },
    { orderBy: { attempt: 'asc' }, limit: page.size, offset: page.offset },
  );
  respond(ctx, 200, collection(attempts.map(serializeDeliveryAttempt), page, total, publicRequestUrl(ctx)));
}

async function showOutcome(ctx: ApiContext): Promise<void> {
  const where = { id: ctx.params['outcome_id'] ?? '', taskResult: readScope(ctx) } as FilterQuery<TaskResultOutcome>;
  respond(ctx, 200, single(serializeOutcome(orNotFound(await ctx.state.em.findOne(TaskResultOutcome, where)))));
}

export const taskResultRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/task-results/:task_result_id',
    auth: 'token',
    summary: 'Show a task result',
    query: { include: SHOW_INCLUDES },
    handler: show,
  },
  {
    method: 'GET',
    path: '/task-results/:task_result_id/outcomes',
    auth: 'token',
    summary: "List a task result's outcomes",
    query: { page: true },
    handler: listOutcomes,
  },
  {
    method: 'GET',
    path: '/task-results/:task_result_id/delivery-attempts',
    auth: 'token',
    summary: "List a task result's deliveries to the task server",
    query: { page: true },
    handler: listDeliveryAttempts,
  },
  { method: 'GET', path: '/task-result-outcomes/:outcome_id', auth: 'token', summary: 'Show a task result outcome', handler: showOutcome },
];
