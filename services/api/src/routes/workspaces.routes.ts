import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { EXECUTION_MODES, newId } from '@runtasks/shared/domain';
import { inLongTransaction, Workspace } from '@runtasks/shared/db';
import { workspaceLockStates } from '@runtasks/shared/engine';
import { z } from 'zod';
import { workspacePermissions, workspaceRights, type WorkspaceGrant } from '../auth/permissions.ts';
import type { Principal } from '../auth/principal.ts';
import { workspaceGrants } from '../auth/workspace-grants.ts';
import { canCreateWorkspaces, workspaceScope } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single, type Resource } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeWorkspace } from '../serializers/workspace.serializer.ts';
import { publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { flexibleBoolean, nameSchema, noRelationships, resourceDocument, safeText } from './schemas.ts';
import { findOrganization } from '../services/organization.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';

const attributes = {
  description: safeText(1000).nullable().optional(),
  'auto-apply': flexibleBoolean.optional(),
  'working-directory': safeText(1000).optional(),
  'terraform-version': z
    .string()
    .regex(/^\d+\.\d+\.\d+$/, 'must be a version such as 1.9.0')
    // terraform_version is varchar(32): a longer version was a 500.
    .max(32, 'must be at most 32 characters')
    .optional(),
  // HCP's `agent` mode (Terraform on the organization's agents) has no counterpart here.
  'execution-mode': z.enum(EXECUTION_MODES, { message: 'must be "remote" or "local" (agent execution is not available)' }).optional(),
};
const createSchema = resourceDocument('workspaces', z.object({ name: nameSchema(90), ...attributes }), noRelationships);
const updateSchema = resourceDocument(
  'workspaces',
  z.object({ name: nameSchema(90).optional(), ...attributes }).default({}),
  noRelationships,
);

type WorkspaceAttributes = z.output<typeof updateSchema>['data']['attributes'];

function applyAttributes(workspace: Workspace, input: WorkspaceAttributes): void {
  if (input.name !== undefined) workspace.name = input.name;
  if (input.description !== undefined) workspace.description = input.description;
  if (input['auto-apply'] !== undefined) workspace.autoApply = input['auto-apply'];
  if (input['working-directory'] !== undefined) workspace.workingDirectory = input['working-directory'];
  if (input['terraform-version'] !== undefined) workspace.terraformVersion = input['terraform-version'];
  if (input['execution-mode'] !== undefined) workspace.executionMode = input['execution-mode'];
}

const permissionsOn = (principal: Principal, workspace: Workspace, grants: ReadonlyMap<string, WorkspaceGrant>) =>
  workspacePermissions(workspaceRights(principal, workspace.organization.id, grants.get(workspace.id) ?? null));

/** The workspaces with the caller's permissions on each: at most one query for the whole list. */
async function serializeWorkspacesFor(ctx: ApiContext, workspaces: readonly Workspace[], organizationName: string): Promise<Resource[]> {
  const principal = ctx.state.principal;
  const grants = await workspaceGrants(
    ctx.state.em,
    principal,
    workspaces.map((workspace) => workspace.id),
  );
  const locks = await workspaceLockStates(
    await poolOf(ctx),
    workspaces.map((workspace) => workspace.id),
  );
  return workspaces.map((workspace) =>
    serializeWorkspace(workspace, organizationName, permissionsOn(principal, workspace, grants), locks.get(workspace.id)),
  );
}

export async function serializeWorkspaceFor(ctx: ApiContext, workspace: Workspace, organizationName: string): Promise<Resource> {
  const [resource] = await serializeWorkspacesFor(ctx, [workspace], organizationName);
  return resource as Resource;
}

const byId = (ctx: ApiContext): FilterQuery<Workspace> => ({ id: ctx.params['workspace_id'] ?? '' });
const byName = (ctx: ApiContext): FilterQuery<Workspace> => ({
  name: ctx.params['workspace_name'] ?? '',
  organization: { name: ctx.params['organization_name'] ?? '' },
});

async function create(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx);
  if (!canCreateWorkspaces(ctx.state.principal, organization.id)) throw notFound();
  const input = parseWith(createSchema, ctx.request.body).data.attributes;
  const workspace = ctx.state.em.create(Workspace, { id: newId('workspace'), organization, name: input.name });
  applyAttributes(workspace, input);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  respond(ctx, 201, single(await serializeWorkspaceFor(ctx, workspace, organization.name)));
}

async function list(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx);
  const page = parsePage(ctx.query);
  const scope = workspaceScope(ctx.state.principal, 'read') ?? { id: null };
  const [workspaces, total] = await ctx.state.em.findAndCount(
    Workspace,
    { $and: [scope, { organization: organization.id }] } as FilterQuery<Workspace>,
    { orderBy: { name: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
  );
  respond(ctx, 200, collection(await serializeWorkspacesFor(ctx, workspaces, organization.name), page, total, publicRequestUrl(ctx)));
}

function showWith(where: (ctx: ApiContext) => FilterQuery<Workspace>) {
  return async (ctx: ApiContext): Promise<void> => {
    const workspace = await findWorkspace(ctx, 'read', where(ctx));
    respond(ctx, 200, single(await serializeWorkspaceFor(ctx, workspace, workspace.organization.name)));
  };
}

function updateWith(where: (ctx: ApiContext) => FilterQuery<Workspace>) {
  return async (ctx: ApiContext): Promise<void> => {
    const workspace = await findWorkspace(ctx, 'manage', where(ctx));
    applyAttributes(workspace, parseWith(updateSchema, ctx.request.body).data.attributes);
    await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
    respond(ctx, 200, single(await serializeWorkspaceFor(ctx, workspace, workspace.organization.name)));
  };
}

function destroyWith(where: (ctx: ApiContext) => FilterQuery<Workspace>) {
  return async (ctx: ApiContext): Promise<void> => {
    const workspace = await findWorkspace(ctx, 'manage', where(ctx));
    // Its runs, results and archives go with it, however many: no statement timeout, only a lock timeout.
    await inLongTransaction(ctx.state.em, ctx.deps.config.databaseStatementTimeoutMs, (tx) =>
      tx.nativeDelete(Workspace, { id: workspace.id }),
    );
    respond(ctx, 204);
  };
}

export const workspaceRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/organizations/:organization_name/workspaces',
    auth: 'token',
    summary: 'Create a workspace',
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/workspaces',
    auth: 'token',
    summary: "List an organization's workspaces",
    query: { page: true },
    handler: list,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/workspaces/:workspace_name',
    auth: 'token',
    summary: 'Show a workspace by name',
    handler: showWith(byName),
  },
  {
    method: 'PATCH',
    path: '/organizations/:organization_name/workspaces/:workspace_name',
    auth: 'token',
    summary: 'Update a workspace by name',
    requestSchema: updateSchema,
    handler: updateWith(byName),
  },
  {
    method: 'DELETE',
    path: '/organizations/:organization_name/workspaces/:workspace_name',
    auth: 'token',
    summary: 'Delete a workspace by name',
    handler: destroyWith(byName),
  },
  { method: 'GET', path: '/workspaces/:workspace_id', auth: 'token', summary: 'Show a workspace', handler: showWith(byId) },
  {
    method: 'PATCH',
    path: '/workspaces/:workspace_id',
    auth: 'token',
    summary: 'Update a workspace',
    requestSchema: updateSchema,
    handler: updateWith(byId),
  },
  { method: 'DELETE', path: '/workspaces/:workspace_id', auth: 'token', summary: 'Delete a workspace', handler: destroyWith(byId) },
];
