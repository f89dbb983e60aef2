import type { FilterQuery } from '@mikro-orm/core';
import { ENFORCEMENT_LEVELS, newId, RUN_STAGES, type RunStage } from '@runtasks/shared/domain';
import { RunTask, WorkspaceTask, type Workspace } from '@runtasks/shared/db';
import { z } from 'zod';
import { audit } from '../services/audit.service.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeWorkspaceTask } from '../serializers/run-task.serializer.ts';
import { assertEditionAllowsWorkspace } from '../services/run-task.service.ts';
import { orNotFound, publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { distinctList, relationshipTo, resourceDocument } from './schemas.ts';
import { findWorkspace } from '../services/workspace.service.ts';

const stageAttributes = {
  // `stage` is deprecated; `stages` wins when both are sent.
  stage: z.enum(RUN_STAGES).optional(),
  stages: distinctList(z.enum(RUN_STAGES)).min(1, 'must name at least one stage').optional(),
};

const createSchema = resourceDocument(
  'workspace-tasks',
  z.object({ 'enforcement-level': z.enum(ENFORCEMENT_LEVELS), ...stageAttributes }),
  z.object({ task: relationshipTo('tasks') }),
);
const updateSchema = z.object({
  data: z.object({
    type: z.literal('workspace-tasks').optional(),
    attributes: z.object({ 'enforcement-level': z.enum(ENFORCEMENT_LEVELS).optional(), ...stageAttributes }).default({}),
  }),
});

const DEFAULT_STAGES: RunStage[] = ['post_plan'];

function stagesFrom(attributes: { stage?: RunStage | undefined; stages?: RunStage[] | undefined }): RunStage[] | undefined {
  if (attributes.stages !== undefined) return attributes.stages;
  if (attributes.stage !== undefined) return [attributes.stage];
  return undefined;
}

const workspaceOf = (ctx: ApiContext): Promise<Workspace> => findWorkspace(ctx, 'run-tasks', { id: ctx.params['workspace_id'] ?? '' });

async function findAssociation(ctx: ApiContext): Promise<WorkspaceTask> {
  const workspace = await workspaceOf(ctx);
  const where = { id: ctx.params['workspace_task_id'] ?? '', workspace: workspace.id } as FilterQuery<WorkspaceTask>;
  return orNotFound(await ctx.state.em.findOne(WorkspaceTask, where));
}

async function create(ctx: ApiContext): Promise<void> {
  const workspace = await workspaceOf(ctx);
  const { attributes, relationships } = parseWith(createSchema, ctx.request.body).data;
  // The task must belong to the workspace's organization; another organization's task is a 404.
  const task = orNotFound(await ctx.state.em.findOne(RunTask, { id: relationships.task.data.id, organization: workspace.organization.id }));
  await assertEditionAllowsWorkspace(ctx.state.em, workspace.organization, workspace.id);
  const association = ctx.state.em.create(WorkspaceTask, {
    id: newId('workspaceTask'),
    workspace,
    task,
    enforcementLevel: attributes['enforcement-level'],
    stages: stagesFrom(attributes) ?? DEFAULT_STAGES,
  });
  await uniqueAs('/data/relationships/task', 'task', () => ctx.state.em.flush());
  await audit(ctx, workspace.organization.id, { type: 'workspace_task', id: association.id }, 'create', {
    workspace: workspace.id,
    task: task.id,
    'enforcement-level': association.enforcementLevel,
    stages: association.stages,
  });
  respond(ctx, 201, single(serializeWorkspaceTask(association)));
}

async function list(ctx: ApiContext): Promise<void> {
  const workspace = await workspaceOf(ctx);
  const page = parsePage(ctx.query);
  const [associations, total] = await ctx.state.em.findAndCount(
    WorkspaceTask,
    { workspace: workspace.id },
    { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
  );
  respond(ctx, 200, collection(associations.map(serializeWorkspaceTask), page, total, publicRequestUrl(ctx)));
}

async function show(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(serializeWorkspaceTask(await findAssociation(ctx))));
}

async function update(ctx: ApiContext): Promise<void> {
  const association = await findAssociation(ctx);
  const { attributes } = parseWith(updateSchema, ctx.request.body).data;
  const before = { 'enforcement-level': association.enforcementLevel, stages: association.stages };
  if (attributes['enforcement-level'] !== undefined) association.enforcementLevel = attributes['enforcement-level'];
  const stages = stagesFrom(attributes);
  if (stages !== undefined) association.stages = stages;
  await ctx.state.em.flush();
  // An enforcement change is its own action in the trail, as HCP's; the stages are an update.
  const enforcementChanged = before['enforcement-level'] !== association.enforcementLevel;
  await audit(
    ctx,
    association.workspace.organization.id,
    { type: 'workspace_task', id: association.id },
    enforcementChanged ? 'change_enforcement' : 'update',
    {
      workspace: association.workspace.id,
      before,
      after: { 'enforcement-level': association.enforcementLevel, stages: association.stages },
    },
  );
  respond(ctx, 200, single(serializeWorkspaceTask(association)));
}

async function destroy(ctx: ApiContext): Promise<void> {
  const association = await findAssociation(ctx);
  await ctx.state.em.nativeDelete(WorkspaceTask, { id: association.id });
  await audit(ctx, association.workspace.organization.id, { type: 'workspace_task', id: association.id }, 'destroy', {
    workspace: association.workspace.id,
  });
  respond(ctx, 204);
}

export const workspaceTaskRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/tasks',
    auth: 'token',
    summary: 'Attach a run task to a workspace',
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/tasks',
    auth: 'token',
    summary: "List a workspace's run tasks",
    query: { page: true },
    handler: list,
  },
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/tasks/:workspace_task_id',
    auth: 'token',
    summary: 'Show a workspace run task',
    handler: show,
  },
  {
    method: 'PATCH',
    path: '/workspaces/:workspace_id/tasks/:workspace_task_id',
    auth: 'token',
    summary: 'Update a workspace run task (enforcement level, stages)',
    requestSchema: updateSchema,
    handler: update,
  },
  {
    method: 'DELETE',
    path: '/workspaces/:workspace_id/tasks/:workspace_task_id',
    auth: 'token',
    summary: 'Detach a run task from a workspace',
    handler: destroy,
  },
];
