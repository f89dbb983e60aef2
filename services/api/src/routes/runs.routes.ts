import { invalidAttribute } from '@runtasks/shared/errors';
import { queueStateAtCreation, type ExecutionMode, type RunAction } from '@runtasks/shared/domain';
import { ConfigurationVersion, prepared, Run, runPrepared } from '@runtasks/shared/db';
import {
  admitAfterChange,
  createInQueue,
  isIdempotencyKeyTaken,
  plannableTasksUnion,
  queueBusySql,
  resultDeadlines,
  type TaskRow,
} from '@runtasks/shared/engine';
import { issueCallbackToken } from '@runtasks/shared/security';
import { z } from 'zod';
import { actedBy, actorId } from '../auth/actor.ts';
import { runPermissions, workspaceRights } from '../auth/permissions.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { readableWorkspaceParams, workspaceAccessSql, WORKSPACE_ROW } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single, type Document, type Resource } from '../http/jsonapi.ts';
import { collection, parsePage, uncountedCollection } from '../http/pagination.ts';
import { serializeRun } from '../serializers/run.serializer.ts';
import { runOptionAttributes, runOptionsFrom } from '../services/run-attributes.ts';
import { applyRunAction, createRun, waitingForRuns, type RunPlace } from '../services/run.service.ts';
import {
  checkReplay,
  IDEMPOTENCY_KEY_HEADER,
  idempotencyKeyOf,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  requestFingerprint,
} from '../services/idempotency.ts';
import { includedForRuns, RUN_INCLUDES, stagesOf, type RunInclude } from './run-includes.ts';
import { findRunPage, ORGANIZATION_RUN_LIST_PARAMS, RUN_LIST_PARAMS } from './run-list.ts';
import { findOrganizationRunPage } from '../services/organization-runs.service.ts';
import { findOrganization } from '../services/organization.service.ts';
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
import { commentIdsOf } from '../services/run-comment.service.ts';
import { findWorkspace, missingRunsPermission } from '../services/workspace.service.ts';

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
    // The same pair for both needs: neither reaches workspaces organization-wide.
    ...readableWorkspaceParams(ctx.state.principal, 'runs:plan'),
  ]);
  const [first] = rows;
  if (!first) return missingRunsPermission(ctx, 'runs:plan', { id: workspaceId }, 'queue runs in it');
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

/**
 * The run an earlier `POST /runs` with this Idempotency-Key created in the workspace, answered as it is
 * now (200, `Idempotent-Replayed: true`); undefined where none did. 422 where that request's body differed.
 */
async function replayed(ctx: ApiContext, workspaceId: string, idempotency: { key: string; fingerprint: string }): Promise<boolean> {
  const earlier = await ctx.state.em
    .fork()
    .findOne(Run, { workspace: workspaceId, idempotencyKey: idempotency.key }, { populate: ['workspace', 'organization'] });
  if (!earlier) return false;
  checkReplay(earlier, idempotency.fingerprint);
  ctx.set('Idempotent-Replayed', 'true');
  respond(ctx, 200, await runDocument(ctx, earlier, new Set()));
  return true;
}

async function create(ctx: ApiContext): Promise<void> {
  const key = idempotencyKeyOf(ctx.request.headers);
  const { attributes, relationships } = parseWith(createSchema, ctx.request.body).data;
  const place = await plannableWorkspace(ctx, relationships.workspace.data.id);
  const idempotency = key === null ? null : { key, fingerprint: requestFingerprint(ctx.request.body) };
  if (idempotency && (await replayed(ctx, place.workspaceId, idempotency))) return;
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
    idempotency,
  };
  const pool = await poolOf(ctx);
  let creation;
  try {
    creation = await createInQueue(queueStateAtCreation(input, place), (queue) =>
      createRun(
        pool,
        place,
        { ...input, queue },
        place.tasks,
        (resultId) => issueCallbackToken(ctx.deps.secrets, resultId),
        resultDeadlines(ctx.deps.config),
      ),
    );
  } catch (error) {
    // Another request with this key won the race: answered with its run, as a retry would be.
    if (idempotency && isIdempotencyKeyTaken(error) && (await replayed(ctx, place.workspaceId, idempotency))) return;
    throw error;
  }
  const { created, queue } = creation;
  const { run, stageIds, job } = created;
  // A run created waiting may be next already (the holder ended meanwhile): admitted now, not at the sweeper's pass.
  if (queue === 'queued') await admitAfterChange(pool, place.workspaceId, queue);
  // Committed: its job goes to the workers now, not on the relay's next poll (which publishes it too).
  ctx.deps.ops?.publishRunCreated?.(job);
  const waiting = await waitingForRuns(pool, [{ ...run, queueState: queue }]);
  respond(ctx, 201, single(serializeRun(run, stageIds, runPermissions(place.mayApply), [], waiting.get(run.id) ?? null)));
}

/** A run's own document as `GET /runs/:id` shows it: its stages, the caller's permissions, its comments, what it waits for. */
async function runDocument(ctx: ApiContext, run: Run, include: ReadonlySet<RunInclude>): Promise<Document> {
  const stagesByRun = await stagesOf(ctx, [run]);
  const stageIds = (stagesByRun.get(run.id) ?? []).map((stage) => stage.id);
  const included = await includedForRuns(ctx, include, [run], stagesByRun);
  const permissions = runPermissions(await mayApplyIn(ctx, run.organization.id, run.workspace.id));
  const comments = await commentIdsOf(ctx.state.em, [run.id]);
  const waiting = await waitingForRuns(await poolOf(ctx), [run]);
  return single(serializeRun(run, stageIds, permissions, comments.get(run.id), waiting.get(run.id) ?? null), included);
}

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const run = await findRun(ctx, 'runs:read', { id: ctx.params['run_id'] ?? '' });
  respond(ctx, 200, await runDocument(ctx, run, include));
}

/** A page of runs as lists show them, with what `include` asks for: a few queries for the whole page, none per run. */
async function runListPage(
  ctx: ApiContext,
  runs: readonly Run[],
  include: ReadonlySet<RunInclude>,
  mayApply: (run: Run) => boolean,
): Promise<{ resources: Resource[]; included: Resource[] }> {
  const stages = await stagesOf(ctx, runs);
  const comments = await commentIdsOf(
    ctx.state.em,
    runs.map((run) => run.id),
  );
  const waiting = await waitingForRuns(await poolOf(ctx), runs);
  const resources = runs.map((run) =>
    serializeRun(
      run,
      (stages.get(run.id) ?? []).map((stage) => stage.id),
      runPermissions(mayApply(run)),
      comments.get(run.id),
      waiting.get(run.id) ?? null,
    ),
  );
  return { resources, included: await includedForRuns(ctx, include, runs, stages) };
}

async function listForWorkspace(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const workspace = await findWorkspace(ctx, 'runs:read', { id: ctx.params['workspace_id'] ?? '' });
  const page = parsePage(ctx.query);
  const [runs, total] = await findRunPage(ctx.state.em, workspace.id, ctx.query, page);
  const mayApply = await mayApplyIn(ctx, workspace.organization.id, workspace.id);
  const { resources, included } = await runListPage(ctx, runs, include, () => mayApply);
  respond(ctx, 200, collection(resources, page, total, publicRequestUrl(ctx), included));
}

/**
 * An organization's runs in the workspaces the caller reads (a team: those it has access to), with
 * HCP's filters; pagination without totals, as HCP's (`next-page` only where a run lies past the page).
 */
async function listForOrganization(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, RUN_INCLUDES);
  const organization = await findOrganization(ctx);
  const page = parsePage(ctx.query);
  const { runs, hasNext } = await findOrganizationRunPage(ctx, organization.id, ctx.query, page);
  const grants = await workspaceGrants(
    ctx.state.em,
    ctx.state.principal,
    runs.map((run) => run.workspace.id),
  );
  const mayApply = (run: Run): boolean =>
    workspaceRights(ctx.state.principal, organization.id, grants.get(run.workspace.id) ?? null).runs === 'apply';
  const { resources, included } = await runListPage(ctx, runs, include, mayApply);
  respond(ctx, 200, uncountedCollection(resources, page, hasNext, publicRequestUrl(ctx), included));
}

function action(name: RunAction) {
  return async (ctx: ApiContext): Promise<void> => {
    const body = parseWith(actionSchema, ctx.request.body);
    const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' }, `${name} it`);
    // As in HCP, the action's comment becomes a comment on the run, recorded with the action.
    await applyRunAction(ctx.state.em, run, name, actedBy(ctx.state.principal, body?.comment));
    // HCP answers run actions with 202 Accepted and no body.
    respond(ctx, 202);
  };
}

export const runRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/runs',
    auth: 'token',
    summary: 'Create a run in a workspace',
    requestSchema: createSchema,
    headers: [
      {
        name: IDEMPOTENCY_KEY_HEADER,
        description: `Up to ${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters, one per run a pipeline means to create (e.g. its CI run id and attempt). A request with a key that created a run in the workspace before answers 200 with that run as it is now (Idempotent-Replayed: true) instead of creating another; the same key with a different body is a 422.`,
      },
    ],
    notes:
      "A run waiting in its workspace's queue shows what it waits for in waiting-for (position, the run holding the workspace: id, status, since, created-by; a person's lock).",
    handler: create,
  },
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
    method: 'GET',
    path: '/organizations/:organization_name/runs',
    auth: 'token',
    summary: "List an organization's runs (those in workspaces the caller reads)",
    notes:
      'Newest first. Pagination without totals, as HCP: meta.pagination has current-page, prev-page, next-page and page-size. filter[timeframe] defaults to the last twelve months.',
    query: { page: true, include: RUN_INCLUDES, params: ORGANIZATION_RUN_LIST_PARAMS },
    handler: listForOrganization,
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
