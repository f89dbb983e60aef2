import { invalidAttribute, notFound } from '@runtasks/shared/errors';
import { queueStateAtCreation, type ExecutionMode, type RunAction } from '@runtasks/shared/domain';
import { ConfigurationVersion, prepared, runPrepared } from '@runtasks/shared/db';
import { admitAfterChange, createInQueue, plannableTasksUnion, queueBusySql, resultDeadlines, type TaskRow } from '@runtasks/shared/engine';
import { issueCallbackToken } from '@runtasks/shared/security';
import { z } from 'zod';
import { actorId } from '../auth/actor.ts';
import { runPermissions, workspaceRights } from '../auth/permissions.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { readableWorkspaceParams, workspaceAccessSql, WORKSPACE_ROW } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeRun } from '../serializers/run.serializer.ts';
import { runOptionAttributes, runOptionsFrom } from '../services/run-attributes.ts';
import { applyRunAction, createRun, type RunPlace } from '../services/run.service.ts';
import { includedForRuns, RUN_INCLUDES, stagesOf } from './run-includes.ts';
import { findRunPage, RUN_LIST_PARAMS } from './run-list.ts';
import { publicRequestUrl, respond, type RouteDef } from './define.ts';
import {
  actionSchema,
  flexibleBoolean,
  MAX_PLAN_DEPTH,
  nestsDeeperThan,
  NO_NUL,
  relationshipTo,
  resourceDocument,
  safeText,
  someString,
  WELL_FORMED,
} from './schemas.ts';
import { findRun } from '../services/run-lookup.service.ts';
import { commentIdsOf, recordActionComment } from '../services/run-comment.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';

// Re-exported only for task-stages.routes.ts and executions.routes.ts until they import these from their new homes.
export { canOverrideTasks, findRun } from '../services/run-lookup.service.ts';
export { MAX_PLAN_DEPTH, nestsDeeperThan, someString } from './schemas.ts';

const createSchema = resourceDocument(
  'runs',
  z
    .object({
      message: safeText(10_000).nullable().optional(),
      'plan-only': flexibleBoolean.optional(),
      'is-destroy': flexibleBoolean.optional(),
      'auto-apply': flexibleBoolean.optional(),
      ...runOptionAttributes,
      // A plan JSON document served to task servers at plan_json_api_url; otherwise a minimal one is.
      'plan-json': z
        .record(z.string(), z.unknown())
        // jsonb holds neither NUL nor an unpaired surrogate, in keys or strings.
        .refine((value) => !someString(value, (text) => text.includes('\u0000')), NO_NUL)
        .refine((value) => !someString(value, (text) => !text.isWellFormed()), WELL_FORMED)
        .refine((value) => !nestsDeeperThan(value, MAX_PLAN_DEPTH), `must not nest deeper than ${MAX_PLAN_DEPTH} levels`)
        .optional(),
    })
    .default({}),
  z.object({
    workspace: relationshipTo('workspaces'),
    'configuration-version': z
      // configuration_version_id is varchar(32): a longer id was a 500.
      .object({ data: z.object({ type: z.literal('configuration-versions'), id: safeText(32) }).nullable() })
      .optional(),
  }),
);

/** Whether the caller may apply, cancel and discard runs in this workspace: at most one query. */
async function mayApplyIn(ctx: ApiContext, organizationId: string, workspaceId: string): Promise<boolean> {
  const grants = await workspaceGrants(ctx.state.em, ctx.state.principal, [workspaceId]);
  return workspaceRights(ctx.state.principal, organizationId, grants.get(workspaceId) ?? null).runs === 'apply';
}

/** The run's configuration version must belong to its workspace and be uploaded. */
async function uploadedConfigurationVersion(
  ctx: ApiContext,
  workspaceId: string,
  id: string | undefined,
): Promise<ConfigurationVersion | null> {
  if (!id) return null;
  const pointer = '/data/relationships/configuration-version/data/id';
  const version = await ctx.state.em.findOne(ConfigurationVersion, { id, workspace: workspaceId });
  if (!version) throw invalidAttribute(pointer, 'No configuration version with this id exists in the workspace.');
  if (version.status !== 'uploaded')
    throw invalidAttribute(pointer, `The configuration version is ${version.status}; upload its archive first.`);
  return version;
}

/**
 * The workspace a run is created in (scoped as `runs:plan`) with its plannable tasks in order, one row
 * per task (one row with null task columns when it has none): one statement. $1 workspace id, $2 $3 scope.
 */
const PLANNABLE_WORKSPACE = prepared(
  'plannable-workspace',
  `select w.id as workspace_id, w.organization_id, w.auto_apply, w.execution_mode, w.terraform_version, entitlement.global_entitled,
          ${workspaceAccessSql(WORKSPACE_ROW, 2, 3, 'runs:apply')} as may_apply, ${queueBusySql('w')} as queue_busy,
          t.task_id, t.workspace_task_id, t.name, t.url, t.hmac_key_encrypted, t.enabled, t.enforcement_level, t.stages
     from workspaces w join organizations o on o.id = w.organization_id
    cross join lateral (select o.edition = 'standard' and o.global_run_tasks_enabled as global_entitled) entitlement
     left join lateral (${plannableTasksUnion('w.id', 'o.id', 'entitlement.global_entitled')}) t on true
    where w.id = $1 and ${workspaceAccessSql(WORKSPACE_ROW, 2, 3, 'runs:plan')}
    order by t.source, t.at, t.tiebreak`,
);

type PlannableWorkspaceRow = {
  workspace_id: string;
  organization_id: string;
  auto_apply: boolean;
  execution_mode: ExecutionMode;
  terraform_version: string;
  global_entitled: boolean;
  may_apply: boolean;
  queue_busy: boolean;
} & (TaskRow | { [K in keyof TaskRow]: null });

/** The workspace a run is created in, as the caller may plan in it; `mayApply`: whether the caller may apply there too. */
async function plannableWorkspace(
  ctx: ApiContext,
  workspaceId: string,
): Promise<RunPlace & { autoApply: boolean; mayApply: boolean; busy: boolean; terraformVersion: string; tasks: TaskRow[] }> {
  const rows = await runPrepared<PlannableWorkspaceRow>(await poolOf(ctx), PLANNABLE_WORKSPACE, [
    workspaceId,
    ...readableWorkspaceParams(ctx.state.principal),
  ]);
  const [first] = rows;
  if (!first) throw notFound();
  return {
    workspaceId: first.workspace_id,
    organizationId: first.organization_id,
    globalEntitled: first.global_entitled,
    executionMode: first.execution_mode,
    autoApply: first.auto_apply,
    terraformVersion: first.terraform_version,
    mayApply: first.may_apply,
    busy: first.queue_busy,
    tasks: rows.filter((row): row is PlannableWorkspaceRow & TaskRow => row.task_id !== null),
  };
}

async function create(ctx: ApiContext): Promise<void> {
  const { attributes, relationships } = parseWith(createSchema, ctx.request.body).data;
  const place = await plannableWorkspace(ctx, relationships.workspace.data.id);
  // A run that applies itself is an apply: asking for one takes the permission to apply (the
  // workspace's own auto-apply setting is its administrators' choice, for every run queued there).
  if (attributes['auto-apply'] === true && !place.mayApply)
    throw invalidAttribute(
      '/data/attributes/auto-apply',
      'Applying runs in this workspace takes the "apply" runs permission: queue the run without auto-apply, for someone who may apply to confirm.',
    );
  const configurationVersion = await uploadedConfigurationVersion(ctx, place.workspaceId, relationships['configuration-version']?.data?.id);
  // A speculative configuration version makes a speculative (plan-only) run, as in HCP.
  const planOnly = (attributes['plan-only'] ?? false) || (configurationVersion?.speculative ?? false);
  const isDestroy = attributes['is-destroy'] ?? false;
  const input = {
    message: attributes.message ?? 'Queued manually via the API',
    planOnly,
    isDestroy,
    autoApply: attributes['auto-apply'] ?? place.autoApply,
    planJson: attributes['plan-json'] ?? null,
    configurationVersionId: configurationVersion?.id ?? null,
    createdBy: actorId(ctx.state.principal),
    options: runOptionsFrom(attributes, { planOnly, isDestroy, workspaceTerraformVersion: place.terraformVersion }),
  };
  const pool = await poolOf(ctx);
  const { created, queue } = await createInQueue(queueStateAtCreation(input, place), (queue) =>
    createRun(
      pool,
      place,
      { ...input, queue },
      place.tasks,
      (resultId) => issueCallbackToken(ctx.deps.secrets, resultId),
      resultDeadlines(ctx.deps.config),
    ),
  );
  const { run, stageIds, job } = created;
  // A run created waiting may be next already (the holder ended meanwhile): admitted now, not at the sweeper's pass.
  if (queue === 'queued') await admitAfterChange(pool, place.workspaceId, queue);
  // Committed: its job goes to the workers now, not on the relay's next poll (which publishes it too).
  ctx.deps.ops?.publishRunCreated?.(job);
  respond(ctx, 201, single(serializeRun(run, stageIds, runPermissions(place.mayApply), [])));
}

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const run = await findRun(ctx, 'runs:read', { id: ctx.params['run_id'] ?? '' });
  const stagesByRun = await stagesOf(ctx, [run]);
  const stageIds = (stagesByRun.get(run.id) ?? []).map((stage) => stage.id);
  const included = await includedForRuns(ctx, include, [run], stagesByRun);
  const permissions = runPermissions(await mayApplyIn(ctx, run.organization.id, run.workspace.id));
  const comments = await commentIdsOf(ctx.state.em, [run.id]);
  respond(ctx, 200, single(serializeRun(run, stageIds, permissions, comments.get(run.id)), included));
}

async function listForWorkspace(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const workspace = await findWorkspace(ctx, 'runs:read', { id: ctx.params['workspace_id'] ?? '' });
  const page = parsePage(ctx.query);
  const [runs, total] = await findRunPage(ctx.state.em, workspace.id, ctx.query, page);
  const stages = await stagesOf(ctx, runs);
  const permissions = runPermissions(await mayApplyIn(ctx, workspace.organization.id, workspace.id));
  const comments = await commentIdsOf(
    ctx.state.em,
    runs.map((run) => run.id),
  );
  const resources = runs.map((run) =>
    serializeRun(
      run,
      (stages.get(run.id) ?? []).map((stage) => stage.id),
      permissions,
      comments.get(run.id),
    ),
  );
  const included = await includedForRuns(ctx, include, runs, stages);
  respond(ctx, 200, collection(resources, page, total, publicRequestUrl(ctx), included));
}

function action(name: RunAction) {
  return async (ctx: ApiContext): Promise<void> => {
    const body = parseWith(actionSchema, ctx.request.body);
    const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' });
    await applyRunAction(ctx.state.em, run, name, actorId(ctx.state.principal));
    // As in HCP, the action's comment becomes a comment on the run, once the action has taken effect.
    await recordActionComment(ctx.state.em, run.id, body?.comment, actorId(ctx.state.principal));
    // HCP answers run actions with 202 Accepted and no body.
    respond(ctx, 202);
  };
}

export const runRoutes: RouteDef[] = [
  { method: 'POST', path: '/runs', auth: 'token', summary: 'Create a run in a workspace', requestSchema: createSchema, handler: create },
  { method: 'GET', path: '/runs/:run_id', auth: 'token', summary: 'Show a run', query: { include: RUN_INCLUDES }, handler: show },
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/runs',
    auth: 'token',
    summary: "List a workspace's runs",
    query: { page: true, include: RUN_INCLUDES, params: RUN_LIST_PARAMS },
    handler: listForWorkspace,
  },
  {
    method: 'POST',
    path: '/runs/:run_id/actions/apply',
    auth: 'token',
    summary: 'Apply a run',
    requestSchema: actionSchema,
    response: { status: 202, content: 'none' },
    handler: action('apply'),
  },
  {
    method: 'POST',
    path: '/runs/:run_id/actions/cancel',
    auth: 'token',
    summary: 'Cancel a run',
    requestSchema: actionSchema,
    response: { status: 202, content: 'none' },
    handler: action('cancel'),
  },
  {
    method: 'POST',
    path: '/runs/:run_id/actions/discard',
    auth: 'token',
    summary: 'Discard a run',
    requestSchema: actionSchema,
    response: { status: 202, content: 'none' },
    handler: action('discard'),
  },
];
