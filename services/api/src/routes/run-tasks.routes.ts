import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { ENFORCEMENT_LEVELS, newId, RUN_STAGES } from '@runtasks/shared/domain';
import { idList, RunTask, StatementShapes, WorkspaceTask, type Organization } from '@runtasks/shared/db';
import { z } from 'zod';
import { organizationsWhere } from '../auth/principal.ts';
import { runTaskScope } from '../auth/run-task-scope.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { audit } from '../services/audit.service.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single, type Resource } from '../http/jsonapi.ts';
import { collection, MAX_PAGE_SIZE, parsePage, type Page } from '../http/pagination.ts';
import { runTaskFromRow, type Absent, type RunTaskRow } from '../serializers/rows.ts';
import { serializeRunTask, serializeWorkspaceTask } from '../serializers/run-task.serializer.ts';
import { tagNamesOf } from '../services/tag.service.ts';
import { serializeWorkspace } from '../serializers/workspace.serializer.ts';
import { assertEditionAllowsAnotherTask, isGlobalEntitled, verifyTaskEndpoint, workspaceTaskIdsOf } from '../services/run-task.service.ts';
import { orNotFound, publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';
import { characters, distinctList, flexibleBoolean, nameSchema, noRelationships, resourceDocument, safeText, taskUrl } from './schemas.ts';

const globalConfiguration = z
  .object({
    enabled: flexibleBoolean.optional(),
    stages: distinctList(z.enum(RUN_STAGES)).optional(),
    'enforcement-level': z.enum(ENFORCEMENT_LEVELS).optional(),
  })
  .nullable()
  .optional();

const hmacKey = safeText(512).nullable().optional();

const mutableAttributes = {
  url: taskUrl,
  description: characters(300).nullable().optional(),
  category: z.literal('task', { error: 'must be "task"' }),
  // HCP's table says hmac-key, its samples hmac_key: both are accepted.
  'hmac-key': hmacKey,
  hmac_key: hmacKey,
  enabled: flexibleBoolean.optional(),
  'global-configuration': globalConfiguration,
};

const createSchema = resourceDocument('tasks', z.object({ name: nameSchema(255), ...mutableAttributes }), z.unknown().optional());
const updateSchema = resourceDocument(
  'tasks',
  z
    .object({
      name: nameSchema(255).optional(),
      url: mutableAttributes.url.optional(),
      description: mutableAttributes.description,
      category: mutableAttributes.category.optional(),
      'hmac-key': hmacKey,
      hmac_key: hmacKey,
      enabled: mutableAttributes.enabled,
      'global-configuration': globalConfiguration,
    })
    .default({}),
  noRelationships,
);

type TaskAttributes = z.output<typeof updateSchema>['data']['attributes'];

const INCLUDES = ['workspace_tasks', 'workspace_tasks.workspace'] as const;

/** `undefined`: not given; `null`: no key (`""` means no key too). */
function hmacKeyOf(attributes: TaskAttributes): string | null | undefined {
  const value = attributes['hmac-key'] !== undefined ? attributes['hmac-key'] : attributes.hmac_key;
  if (value === undefined) return undefined;
  return value === null || value === '' ? null : value;
}

function applyGlobalConfiguration(task: RunTask, input: TaskAttributes['global-configuration']): void {
  // Patch-merged: the provider's global-settings resource sends only the sub-fields it changes.
  if (!input) return;
  if (input.enabled !== undefined) task.globalEnabled = input.enabled;
  if (input.stages !== undefined) task.globalStages = input.stages;
  if (input['enforcement-level'] !== undefined) task.globalEnforcementLevel = input['enforcement-level'];
}

async function findTask(ctx: ApiContext): Promise<RunTask> {
  const scope = runTaskScope(ctx.state.principal);
  if (!scope) throw notFound();
  const where = { ...scope, id: ctx.params['task_id'] ?? '' } as FilterQuery<RunTask>;
  return orNotFound(await ctx.state.em.findOne(RunTask, where, { populate: ['organization'] }));
}

async function render(
  ctx: ApiContext,
  tasks: readonly RunTask[],
  organization: Organization,
): Promise<{ data: Resource[]; included: Resource[] }> {
  const include = parseInclude(ctx.query, INCLUDES);
  const idsByTask = await workspaceTaskIdsOf(
    ctx.state.em,
    tasks.map((task) => task.id),
  );
  const view = { organizationName: organization.name, globalEntitled: isGlobalEntitled(organization) };
  const data = tasks.map((task) => serializeRunTask(task, { ...view, workspaceTaskIds: idsByTask.get(task.id) ?? [] }));
  const included: Resource[] = [];
  if (include.size > 0 && tasks.length > 0) {
    const associations = await ctx.state.em.find(
      WorkspaceTask,
      { task: { $in: tasks.map((task) => task.id) } },
      { populate: include.has('workspace_tasks.workspace') ? ['workspace'] : [], orderBy: { createdAt: 'asc', id: 'asc' } },
    );
    included.push(...associations.map(serializeWorkspaceTask));
    if (include.has('workspace_tasks.workspace')) {
      const tagNames = await tagNamesOf(
        await poolOf(ctx),
        associations.map((association) => association.workspace.id),
      );
      included.push(
        ...associations.map((association) =>
          serializeWorkspace(association.workspace, organization.name, tagNames.get(association.workspace.id) ?? []),
        ),
      );
    }
  }
  return { data, included };
}

async function create(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx);
  if (!runTaskScope(ctx.state.principal)) throw notFound();
  const attributes = parseWith(createSchema, ctx.request.body).data.attributes;
  await assertEditionAllowsAnotherTask(ctx.state.em, organization);
  const key = hmacKeyOf(attributes) ?? null;
  await verifyTaskEndpoint(ctx.deps, organization.name, attributes.url, key);
  const task = ctx.state.em.create(RunTask, {
    id: newId('task'),
    organization,
    name: attributes.name,
    url: attributes.url,
    description: attributes.description ?? null,
    category: 'task',
    hmacKeyEncrypted: key === null ? null : ctx.deps.secrets.encrypt(key),
    enabled: attributes.enabled ?? true,
  });
  // Without the entitlement, global options are silently ignored (go-tfe's own test expects this).
  if (isGlobalEntitled(organization)) applyGlobalConfiguration(task, attributes['global-configuration']);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  await audit(ctx, organization.id, { type: 'task', id: task.id }, 'create', attributes);
  const { data, included } = await render(ctx, [task], organization);
  respond(ctx, 201, single(data[0] as Resource, included));
}

/**
 * A page of an organization's tasks with their workspace-task ids, in one prepared statement: no rows
 * when the organization is not the caller's ($2: theirs, null for the site admin), one row with a null
 * task for a page past the end. The page size is written into the text (one statement per size) and
 * the offset is a sub-select, so that every plan prices them alike and PostgreSQL keeps one generic
 * plan instead of planning each page again (docs/design.md, "The task list's page").
 */
const TASK_PAGES = new StatementShapes('run-task-page', MAX_PAGE_SIZE);

export function taskPageText(size: number): string {
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) throw new Error(`not a page size: ${size}`);
  // The page's workspace-task ids are gathered in one pass over workspace_tasks, not one sub-select per
  // task: a generic plan cannot see which task a sub-select is for and prices each at the table's
  // average, so where a few tasks are attached to many workspaces every task of the page scanned it.
  return `with o as (
       select id, name, run_task_count, edition, global_run_tasks_enabled from organizations
        where name = $1 and ($2::text[] is null or id = any($2::text[]))),
     page as (
       select rt.* from o cross join lateral (
         select * from run_tasks rt where rt.organization_id = o.id order by rt.created_at, rt.id limit ${size} offset (select $3::bigint)) rt),
     links as (
       select wt.task_id, string_agg(wt.id, ',' order by wt.created_at, wt.id) as ids
         from workspace_tasks wt where wt.task_id in (select id from page) group by wt.task_id)
   select o.name as organization_name, o.run_task_count, (o.edition = 'standard' and o.global_run_tasks_enabled) as global_entitled,
          t.id, t.name, t.url, t.description, t.category, t.enabled, t.global_enabled, t.global_stages, t.global_enforcement_level,
          t.created_at, t.updated_at, coalesce(l.ids, '') as workspace_task_ids
     from o left join page t on true left join links l on l.task_id = t.id
    order by t.created_at, t.id`;
}

type TaskPageRow = { organization_name: string; run_task_count: number; global_entitled: boolean; workspace_task_ids: string } & (
  RunTaskRow | Absent<RunTaskRow>
);

/** The list as go-tfe and the provider ask for it (nothing included). */
async function listPlain(ctx: ApiContext, page: Page): Promise<void> {
  const principal = ctx.state.principal;
  // Not the caller's organization, or not their tasks: one and the same 404.
  const organizationIds = organizationsWhere(principal, (rights) => rights.owner || rights.manageRunTasks);
  if (organizationIds?.length === 0) throw notFound();
  const rows = await TASK_PAGES.run<TaskPageRow>(await poolOf(ctx), taskPageText(page.size), [
    ctx.params['organization_name'] ?? '',
    organizationIds,
    page.offset,
  ]);
  const first = orNotFound(rows[0]);
  const view = { organizationName: first.organization_name, globalEntitled: first.global_entitled };
  const data = rows.flatMap((row) =>
    row.id === null ? [] : [serializeRunTask(runTaskFromRow(row), { ...view, workspaceTaskIds: idList(row.workspace_task_ids) })],
  );
  respond(ctx, 200, collection(data, page, first.run_task_count, publicRequestUrl(ctx)));
}

/** The page of a valid request that includes nothing; anything else takes the general path (and its errors, in its order). */
function plainPage(ctx: ApiContext): Page | undefined {
  try {
    const page = parsePage(ctx.query);
    return parseInclude(ctx.query, INCLUDES).size === 0 ? page : undefined;
  } catch {
    return undefined;
  }
}

async function list(ctx: ApiContext): Promise<void> {
  const plain = plainPage(ctx);
  if (plain) return listPlain(ctx, plain);
  const organization = await findOrganization(ctx);
  const scope = runTaskScope(ctx.state.principal);
  if (!scope) throw notFound();
  const page = parsePage(ctx.query);
  parseInclude(ctx.query, INCLUDES);
  // The organization found above is in the caller's scope, and so are its tasks (runTaskScope). The
  // total is the organization's own count, kept by triggers: no count of the rows on every page.
  const tasks = await ctx.state.em.find(
    RunTask,
    { organization: organization.id },
    { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
  );
  const total = organization.runTaskCount;
  const { data, included } = await render(ctx, tasks, organization);
  respond(ctx, 200, collection(data, page, total, publicRequestUrl(ctx), included));
}

async function show(ctx: ApiContext): Promise<void> {
  parseInclude(ctx.query, INCLUDES);
  const task = await findTask(ctx);
  const { data, included } = await render(ctx, [task], task.organization);
  respond(ctx, 200, single(data[0] as Resource, included));
}

async function update(ctx: ApiContext): Promise<void> {
  const task = await findTask(ctx);
  const attributes = parseWith(updateSchema, ctx.request.body).data.attributes;
  const currentKey = task.hmacKeyEncrypted ? ctx.deps.secrets.decrypt(task.hmacKeyEncrypted) : null;
  const givenKey = hmacKeyOf(attributes);
  const nextKey = givenKey === undefined ? currentKey : givenKey;
  const nextUrl = attributes.url ?? task.url;
  if (nextUrl !== task.url || nextKey !== currentKey) await verifyTaskEndpoint(ctx.deps, task.organization.name, nextUrl, nextKey);
  if (attributes.name !== undefined) task.name = attributes.name;
  if (attributes.description !== undefined) task.description = attributes.description;
  if (attributes.enabled !== undefined) task.enabled = attributes.enabled;
  task.url = nextUrl;
  if (nextKey !== currentKey) task.hmacKeyEncrypted = nextKey === null ? null : ctx.deps.secrets.encrypt(nextKey);
  if (isGlobalEntitled(task.organization)) applyGlobalConfiguration(task, attributes['global-configuration']);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  await audit(ctx, task.organization.id, { type: 'task', id: task.id }, 'update', attributes);
  const { data, included } = await render(ctx, [task], task.organization);
  respond(ctx, 200, single(data[0] as Resource, included));
}

async function destroy(ctx: ApiContext): Promise<void> {
  const task = await findTask(ctx);
  // Associations go with it (foreign key cascade); results keep their snapshot and finish.
  await ctx.state.em.nativeDelete(RunTask, { id: task.id });
  await audit(ctx, task.organization.id, { type: 'task', id: task.id }, 'destroy', { name: task.name });
  respond(ctx, 204);
}

export const runTaskRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/organizations/:organization_name/tasks',
    auth: 'token',
    summary: 'Create a run task (its endpoint is verified first)',
    requestSchema: createSchema,
    query: { include: INCLUDES },
    handler: create,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/tasks',
    auth: 'token',
    summary: "List an organization's run tasks",
    query: { page: true, include: INCLUDES },
    handler: list,
  },
  { method: 'GET', path: '/tasks/:task_id', auth: 'token', summary: 'Show a run task', query: { include: INCLUDES }, handler: show },
  {
    method: 'PATCH',
    path: '/tasks/:task_id',
    auth: 'token',
    summary: 'Update a run task',
    requestSchema: updateSchema,
    query: { include: INCLUDES },
    handler: update,
  },
  {
    method: 'DELETE',
    path: '/tasks/:task_id',
    auth: 'token',
    summary: 'Delete a run task and its workspace associations',
    handler: destroy,
  },
];
