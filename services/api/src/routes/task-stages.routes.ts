import { forbidden } from '@runtasks/shared/errors';
import { prepared, runPrepared, TaskResult, TaskStage } from '@runtasks/shared/db';
import { RUN_STAGES } from '@runtasks/shared/domain';
import { runPermissions, workspacePermissions, workspaceRights } from '../auth/permissions.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { readableWorkspaceParams, readableWorkspaceSql, RUN_ROW } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { audit } from '../services/audit.service.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single, type Resource } from '../http/jsonapi.ts';
import { collection, parsePage, type Page } from '../http/pagination.ts';
import { idList, idListSql, taskStageFromRow, type Absent, type TaskStageRow } from '../serializers/rows.ts';
import { serializeRun } from '../serializers/run.serializer.ts';
import { serializeTaskResult, serializeTaskStage } from '../serializers/task-stage.serializer.ts';
import { serializeWorkspace } from '../serializers/workspace.serializer.ts';
import { tagNamesOf } from '../services/tag.service.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { canOverrideTasks, findRun, findStage } from '../services/run-lookup.service.ts';
import { overrideSchema } from './schemas.ts';
import { overrideTaskStage } from '../services/task-stage.service.ts';
import { commentIdsOf } from '../services/run-comment.service.ts';
import { waitingForRuns } from '../services/run.service.ts';
import { actedBy } from '../auth/actor.ts';

const INCLUDES = ['run', 'run.workspace', 'task_results', 'policy_evaluations'] as const;
type Include = (typeof INCLUDES)[number];

const stageOrder = (stage: TaskStage): number => RUN_STAGES.indexOf(stage.stage);

/** The stages' results in the order a stage lists them (as created). */
async function resultsOf(ctx: ApiContext, stageIds: readonly string[]): Promise<TaskResult[]> {
  if (stageIds.length === 0) return [];
  return ctx.state.em.find(TaskResult, { taskStage: { $in: [...stageIds] } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

async function render(
  ctx: ApiContext,
  stages: readonly TaskStage[],
  include: Set<Include>,
): Promise<{ data: Resource[]; included: Resource[] }> {
  const em = ctx.state.em;
  const results = await resultsOf(
    ctx,
    stages.map((stage) => stage.id),
  );
  const data = stages.map((stage) =>
    serializeTaskStage(
      stage,
      results.filter((result) => result.taskStage.id === stage.id).map((result) => result.id),
      { canOverrideTasks: canOverrideTasks(ctx.state.principal, stage.run.organization.id) },
    ),
  );
  const included: Resource[] = [];
  if (include.has('task_results')) included.push(...results.map(serializeTaskResult));
  if (include.has('run') || include.has('run.workspace')) {
    // The included run is the run's own document: all of its stages, not only those on this page.
    const runs = [...new Map(stages.map((stage) => [stage.run.id, stage.run])).values()];
    const siblings = (await em.find(TaskStage, { run: { $in: runs.map((run) => run.id) } })).sort((a, b) => stageOrder(a) - stageOrder(b));
    // With the caller's permissions, as the run's and the workspace's own documents have them.
    const grants = await workspaceGrants(
      em,
      ctx.state.principal,
      runs.map((run) => run.workspace.id),
    );
    const tagNames = include.has('run.workspace')
      ? await tagNamesOf(
          await poolOf(ctx),
          runs.map((run) => run.workspace.id),
        )
      : new Map<string, string[]>();
    const comments = await commentIdsOf(
      em,
      runs.map((run) => run.id),
    );
    const waiting = await waitingForRuns(await poolOf(ctx), runs);
    for (const run of runs) {
      const stageIds = siblings.filter((other) => other.run.id === run.id).map((other) => other.id);
      const rights = workspaceRights(ctx.state.principal, run.organization.id, grants.get(run.workspace.id) ?? null);
      included.push(
        serializeRun(run, stageIds, runPermissions(rights.runs === 'apply'), comments.get(run.id), waiting.get(run.id) ?? null),
      );
      if (include.has('run.workspace'))
        included.push(
          serializeWorkspace(run.workspace, run.organization.name, tagNames.get(run.workspace.id) ?? [], workspacePermissions(rights)),
        );
    }
  }
  return { data, included };
}

/**
 * A run's stages with their results' ids, for the reader (no rows: no such run, or not theirs; one row
 * with a null stage: a run without stages). One prepared statement, no unit of work.
 */
const READABLE_RUN_STAGES = prepared(
  'run-task-stages',
  `select r.organization_id, ts.id, ts.run_id, ts.stage, ts.status, ts.status_timestamps, ts.created_at, ts.updated_at,
          ${idListSql('select tr.id from task_results tr where tr.task_stage_id = ts.id order by tr.created_at, tr.id')} as result_ids
     from runs r
     left join task_stages ts on ts.run_id = r.id
    where r.id = $1 and ${readableWorkspaceSql(RUN_ROW, 2, 3)}`,
);

type RunStageRow = { organization_id: string; result_ids: string } & (TaskStageRow | Absent<TaskStageRow>);

/** The list as go-tfe asks for it (nothing included): the common case, read in one statement. */
async function listForRunPlain(ctx: ApiContext, page: Page): Promise<void> {
  const rows = await runPrepared<RunStageRow>(await poolOf(ctx), READABLE_RUN_STAGES, [
    ctx.params['run_id'] ?? '',
    ...readableWorkspaceParams(ctx.state.principal, 'runs:read'),
  ]);
  const organizationId = orNotFound(rows[0]).organization_id;
  const permissions = { canOverrideTasks: canOverrideTasks(ctx.state.principal, organizationId) };
  const stages = rows
    .flatMap((row) => (row.id === null ? [] : [{ stage: taskStageFromRow(row), resultIds: idList(row.result_ids) }]))
    .sort((a, b) => RUN_STAGES.indexOf(a.stage.stage) - RUN_STAGES.indexOf(b.stage.stage));
  const data = stages
    .slice(page.offset, page.offset + page.size)
    .map(({ stage, resultIds }) => serializeTaskStage(stage, resultIds, permissions));
  respond(ctx, 200, collection(data, page, stages.length, publicRequestUrl(ctx)));
}

async function listForRun(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, INCLUDES);
  const page = parsePage(ctx.query);
  if (include.size === 0) return listForRunPlain(ctx, page);
  const run = await findRun(ctx, 'runs:read', { id: ctx.params['run_id'] ?? '' });
  // Only the included workspace document needs the organization's name (its links).
  if (include.has('run.workspace')) await ctx.state.em.populate(run, ['organization']);
  // At most four stages per run: ordered in lifecycle order and paginated in memory. Their `run` is
  // the run loaded above (one identity map), so it is not read again.
  const stages = (await ctx.state.em.find(TaskStage, { run: run.id })).sort((a, b) => stageOrder(a) - stageOrder(b));
  const { data, included } = await render(ctx, stages.slice(page.offset, page.offset + page.size), include);
  respond(ctx, 200, collection(data, page, stages.length, publicRequestUrl(ctx), included));
}

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, INCLUDES);
  const stage = await findStage(ctx);
  const { data, included } = await render(ctx, [stage], include);
  respond(ctx, 200, single(data[0] as Resource, included));
}

async function override(ctx: ApiContext): Promise<void> {
  const body = parseWith(overrideSchema, ctx.request.body);
  const stage = await findStage(ctx);
  // The caller reads the stage: naming what it lacks tells it nothing it could not see.
  if (!canOverrideTasks(ctx.state.principal, stage.run.organization.id))
    throw forbidden(
      'This token may read the task stage but may not override it: that takes the organization\'s "manage policy overrides" permission.',
    );
  // As in HCP, the override's comment becomes a comment on the run, recorded with the override.
  const overridden = await overrideTaskStage(ctx.state.em, stage, actedBy(ctx.state.principal, body?.comment));
  await audit(ctx, stage.run.organization.id, { type: 'task_stage', id: stage.id }, 'override', {
    run: stage.run.id,
    stage: stage.stage,
    comment: body?.comment ?? null,
  });
  const results = await resultsOf(ctx, [stage.id]);
  const permissions = { canOverrideTasks: canOverrideTasks(ctx.state.principal, stage.run.organization.id) };
  const data = serializeTaskStage(
    taskStageFromRow(overridden),
    results.map((result) => result.id),
    permissions,
  );
  respond(ctx, 200, single(data));
}

export const taskStageRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/runs/:run_id/task-stages',
    auth: 'token',
    summary: "List a run's task stages",
    query: { page: true, include: INCLUDES },
    handler: listForRun,
  },
  {
    method: 'GET',
    path: '/task-stages/:task_stage_id',
    auth: 'token',
    summary: 'Show a task stage',
    query: { include: INCLUDES },
    handler: show,
  },
  {
    method: 'POST',
    path: '/task-stages/:task_stage_id/actions/override',
    auth: 'token',
    summary: 'Override a task stage awaiting override, so the run continues',
    requestSchema: overrideSchema,
    response: { status: 200 },
    handler: override,
  },
];
