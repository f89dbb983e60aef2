import type { FilterQuery } from '@mikro-orm/core';
import {
  ConfigurationVersion,
  invalidAttribute,
  issueCallbackToken,
  resultDeadlines,
  notFound,
  plannableTasksUnion,
  prepared,
  Run,
  RUN_STAGES,
  runPrepared,
  TaskResult,
  TaskStage,
  type ExecutionMode,
  type RunAction,
  type TaskRow,
  admitAfterChange,
  createInQueue,
  queueBusySql,
  queueStateAtCreation,
} from '@runtasks/shared';
import { z } from 'zod';
import { runPermissions, workspaceRights } from '../auth/permissions.ts';
import type { Principal } from '../auth/principal.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { readableWorkspaceParams, workspaceAccessSql, workspaceScope, WORKSPACE_ROW, type WorkspaceNeed } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single, type Resource } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeApply, serializePlan } from '../serializers/execution.serializer.ts';
import { serializeRun } from '../serializers/run.serializer.ts';
import { serializeTaskStage } from '../serializers/task-stage.serializer.ts';
import { applyRunAction, createRun, type RunPlace } from '../services/run.service.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { findWorkspace } from './workspaces.routes.ts';
import { flexibleBoolean, NO_NUL, relationshipTo, resourceDocument, safeText, WELL_FORMED } from './schemas.ts';

/** How deep a plan document may nest: JSON.stringify (MikroORM, Koa, the worker) recurses, and a few thousand levels overflow the stack. */
export const MAX_PLAN_DEPTH = 512;

/** Whether a value nests objects or arrays deeper than `max` levels (the value itself is level 1); iterative. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const pending: [unknown, number][] = [[value, 1]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(item)) pending.push([child, depth + 1]);
  }
  return false;
}

/** Whether any key or string of a JSON value matches: iterative, so deep nesting cannot overflow the stack. */
export function someString(value: unknown, matches: (text: string) => boolean): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      if (matches(item)) return true;
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (matches(key)) return true;
        pending.push(child);
      }
    }
  }
  return false;
}

const createSchema = resourceDocument(
  'runs',
  z
    .object({
      message: safeText(10_000).nullable().optional(),
      'plan-only': flexibleBoolean.optional(),
      'is-destroy': flexibleBoolean.optional(),
      'auto-apply': flexibleBoolean.optional(),
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

// Not a union with z.undefined(): a union reports any failure at the document root, losing the pointer.
export const actionSchema = z.object({ comment: safeText(10_000).nullable().optional() }).optional();

/** Runs are found through their workspace's scope, in the same query. */
export async function findRun(ctx: ApiContext, need: WorkspaceNeed, where: FilterQuery<Run>): Promise<Run> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) throw notFound();
  return orNotFound(
    await ctx.state.em.findOne(Run, { $and: [where, { workspace: scope }] } as FilterQuery<Run>, { populate: ['workspace'] }),
  );
}

export function canOverrideTasks(principal: Principal, organizationId: string): boolean {
  if (principal.kind === 'team') return principal.organizationId === organizationId && principal.managePolicyOverrides;
  return principal.kind === 'admin' || principal.organizationId === organizationId;
}

/** Whether the caller may apply, cancel and discard runs in this workspace: at most one query. */
async function mayApplyIn(ctx: ApiContext, organizationId: string, workspaceId: string): Promise<boolean> {
  const grants = await workspaceGrants(ctx.state.em, ctx.state.principal, [workspaceId]);
  return workspaceRights(ctx.state.principal, organizationId, grants.get(workspaceId) ?? null).runs === 'apply';
}

const stageOrder = (stage: TaskStage): number => RUN_STAGES.indexOf(stage.stage);

async function stagesOf(ctx: ApiContext, runs: readonly Run[]): Promise<Map<string, TaskStage[]>> {
  const stages = runs.length === 0 ? [] : await ctx.state.em.find(TaskStage, { run: { $in: runs.map((run) => run.id) } });
  const byRun = new Map<string, TaskStage[]>();
  for (const stage of stages.sort((a, b) => stageOrder(a) - stageOrder(b))) {
    byRun.set(stage.run.id, [...(byRun.get(stage.run.id) ?? []), stage]);
  }
  return byRun;
}

/** The task stages of these runs as included resources, with their results' ids: one query for all of them. */
async function includedStages(ctx: ApiContext, runs: readonly Run[], stagesByRun: ReadonlyMap<string, TaskStage[]>): Promise<Resource[]> {
  const stages = runs.flatMap((run) => stagesByRun.get(run.id) ?? []);
  if (stages.length === 0) return [];
  const results = await ctx.state.em.find(
    TaskResult,
    { taskStage: { $in: stages.map((stage) => stage.id) } },
    { fields: ['id', 'taskStage'], orderBy: { createdAt: 'asc', id: 'asc' } },
  );
  const resultIds = new Map<string, string[]>();
  for (const result of results) resultIds.set(result.taskStage.id, [...(resultIds.get(result.taskStage.id) ?? []), result.id]);
  return runs.flatMap((run) => {
    const permissions = { canOverrideTasks: canOverrideTasks(ctx.state.principal, run.organization.id) };
    return (stagesByRun.get(run.id) ?? []).map((stage) => serializeTaskStage(stage, resultIds.get(stage.id) ?? [], permissions));
  });
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
  `select w.id as workspace_id, w.organization_id, w.auto_apply, w.execution_mode, entitlement.global_entitled,
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
  global_entitled: boolean;
  may_apply: boolean;
  queue_busy: boolean;
} & (TaskRow | { [K in keyof TaskRow]: null });

/** The workspace a run is created in, as the caller may plan in it; `mayApply`: whether the caller may apply there too. */
async function plannableWorkspace(
  ctx: ApiContext,
  workspaceId: string,
): Promise<RunPlace & { autoApply: boolean; mayApply: boolean; busy: boolean; tasks: TaskRow[] }> {
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
  const input = {
    message: attributes.message ?? 'Queued manually via the API',
    // A speculative configuration version makes a speculative (plan-only) run, as in HCP.
    planOnly: (attributes['plan-only'] ?? false) || (configurationVersion?.speculative ?? false),
    isDestroy: attributes['is-destroy'] ?? false,
    autoApply: attributes['auto-apply'] ?? place.autoApply,
    planJson: attributes['plan-json'] ?? null,
    configurationVersionId: configurationVersion?.id ?? null,
    createdBy: ctx.state.principal.tokenId,
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
  respond(ctx, 201, single(serializeRun(run, stageIds, runPermissions(place.mayApply))));
}

/** The runs' plans and applies as included resources, where `include` asks for them. */
const includedExecutions = (include: ReadonlySet<string>, runs: readonly Run[]): Resource[] => [
  ...(include.has('plan') ? runs.map(serializePlan) : []),
  ...(include.has('apply') ? runs.map(serializeApply) : []),
];

const RUN_INCLUDES = ['task_stages', 'plan', 'apply'] as const;

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const run = await findRun(ctx, 'runs:read', { id: ctx.params['run_id'] ?? '' });
  const stagesByRun = await stagesOf(ctx, [run]);
  const stages = stagesByRun.get(run.id) ?? [];
  const included = [
    ...(include.has('task_stages') ? await includedStages(ctx, [run], stagesByRun) : []),
    ...includedExecutions(include, [run]),
  ];
  const permissions = runPermissions(await mayApplyIn(ctx, run.organization.id, run.workspace.id));
  respond(
    ctx,
    200,
    single(
      serializeRun(
        run,
        stages.map((stage) => stage.id),
        permissions,
      ),
      included,
    ),
  );
}

async function listForWorkspace(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const workspace = await findWorkspace(ctx, 'runs:read', { id: ctx.params['workspace_id'] ?? '' });
  const page = parsePage(ctx.query);
  const [runs, total] = await ctx.state.em.findAndCount(
    Run,
    { workspace: workspace.id },
    { orderBy: { createdAt: 'desc', id: 'desc' }, limit: page.size, offset: page.offset },
  );
  const stages = await stagesOf(ctx, runs);
  const permissions = runPermissions(await mayApplyIn(ctx, workspace.organization.id, workspace.id));
  const resources = runs.map((run) =>
    serializeRun(
      run,
      (stages.get(run.id) ?? []).map((stage) => stage.id),
      permissions,
    ),
  );
  const included = [...(include.has('task_stages') ? await includedStages(ctx, runs, stages) : []), ...includedExecutions(include, runs)];
  respond(ctx, 200, collection(resources, page, total, publicRequestUrl(ctx), included));
}

function action(name: RunAction) {
  return async (ctx: ApiContext): Promise<void> => {
    parseWith(actionSchema, ctx.request.body);
    const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' });
    await applyRunAction(ctx.state.em, run, name);
    // HCP answers run actions with 202 Accepted and no body.
    respond(ctx, 202);
  };
}

/** A minimal valid plan document for runs created without one, so task servers always have a plan to read. */
function minimalPlan(terraformVersion: string): Record<string, unknown> {
  return {
    format_version: '1.2',
    terraform_version: terraformVersion,
    planned_values: { root_module: {} },
    resource_changes: [],
    configuration: { root_module: {} },
  };
}

function planJson(where: (ctx: ApiContext) => FilterQuery<Run>) {
  return async (ctx: ApiContext): Promise<void> => {
    const access = ctx.state.taskAccess;
    // A task result's access token reads its own run's plan only; anything else is a 404.
    const run = access
      ? orNotFound(
          await ctx.state.em.findOne(Run, { $and: [where(ctx), { id: access.runId }] } as FilterQuery<Run>, { populate: ['workspace'] }),
        )
      : await findRun(ctx, 'runs:read', where(ctx));
    await ctx.state.em.populate(run, ['planJson']);
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = run.planJson ?? minimalPlan(run.workspace.terraformVersion);
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
    query: { page: true, include: RUN_INCLUDES },
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
  {
    method: 'GET',
    path: '/plans/:plan_id/json-output',
    auth: 'token-or-task',
    summary: "Download a plan's JSON output (by plan id)",
    response: { status: 200, content: 'json' },
    handler: planJson((ctx) => ({ planId: ctx.params['plan_id'] ?? '' })),
  },
  {
    method: 'GET',
    path: '/runs/:run_id/plan/json-output',
    auth: 'token-or-task',
    summary: "Download a run's plan JSON output",
    response: { status: 200, content: 'json' },
    handler: planJson((ctx) => ({ id: ctx.params['run_id'] ?? '' })),
  },
];
