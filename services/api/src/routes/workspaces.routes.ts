import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { newId } from '@runtasks/shared/domain';
import { inLongTransaction, Workspace } from '@runtasks/shared/db';
import { canCreateWorkspaces } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { audit } from '../services/audit.service.ts';
import { parseWith } from '../http/body.ts';
import { single, type Document } from '../http/jsonapi.ts';
import { parseWorkspaceIncludes, WORKSPACE_INCLUDES, workspaceDocuments, type WorkspaceInclude } from './workspace-documents.ts';
import { listWorkspaces, WORKSPACE_LIST_QUERY } from './workspace-list.ts';
import { orNotFound, respond, uniqueAs, type RouteDef } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { applyAttributes, createSchema, updateSchema } from './workspace-attributes.ts';
import { linkTags, replaceTags, resolveTags, type TagSelection } from '../services/tag.service.ts';
import { inTransaction } from '../services/transaction.ts';
import type { TagReference } from './tag-schemas.ts';

async function documentFor(ctx: ApiContext, workspace: Workspace, include: ReadonlySet<WorkspaceInclude> = new Set()): Promise<Document> {
  const { data, included } = await workspaceDocuments(ctx, [workspace], include);
  return single(orNotFound(data[0]), included);
}

const byId = (ctx: ApiContext): FilterQuery<Workspace> => ({ id: ctx.params['workspace_id'] ?? '' });
const byName = (ctx: ApiContext): FilterQuery<Workspace> => ({
  name: ctx.params['workspace_name'] ?? '',
  organization: { name: ctx.params['organization_name'] ?? '' },
});

interface TaggedDocument {
  attributes: { 'tag-names'?: string[] | undefined };
  relationships?: { tags?: { data: TagReference[] } | undefined } | undefined;
}

/** The tags a create or update document gives (`tag-names` and the `tags` relationship together), if it gives any. */
async function tagsOf(ctx: ApiContext, organizationId: string, data: TaggedDocument): Promise<TagSelection | undefined> {
  const names = data.attributes['tag-names'];
  const references = data.relationships?.tags?.data;
  if (names === undefined && references === undefined) return undefined;
  return resolveTags(ctx.state.em, organizationId, references ?? [], (index) => `/data/relationships/tags/data/${index}`, names ?? []);
}

/** Writes the workspace and its tags in one transaction: a taken name leaves no tag behind. */
async function save(ctx: ApiContext, work: () => Promise<void>): Promise<void> {
  await inTransaction(ctx.state.em, async () => {
    await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
    await work();
  });
}

async function create(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx);
  if (!canCreateWorkspaces(ctx.state.principal, organization.id)) throw notFound();
  const document = parseWith(createSchema, ctx.request.body).data;
  const input = document.attributes;
  const tags = await tagsOf(ctx, organization.id, document);
  const workspace = ctx.state.em.create(Workspace, {
    id: newId('workspace'),
    organization,
    name: input.name,
    triggerPrefixes: [],
    triggerPatterns: [],
    // Without an execution mode of its own, a workspace inherits the organization's default (HCP's rule).
    executionMode: organization.defaultExecutionMode,
  });
  applyAttributes(workspace, input);
  await save(ctx, async () => {
    if (tags) await linkTags(ctx.state.em, organization.id, [workspace.id], tags);
  });
  await audit(ctx, organization.id, { type: 'workspace', id: workspace.id }, 'create', { name: workspace.name });
  respond(ctx, 201, await documentFor(ctx, workspace));
}

function showWith(where: (ctx: ApiContext) => FilterQuery<Workspace>) {
  return async (ctx: ApiContext): Promise<void> => {
    const include = parseWorkspaceIncludes(ctx);
    const workspace = await findWorkspace(ctx, 'read', where(ctx));
    respond(ctx, 200, await documentFor(ctx, workspace, include));
  };
}

function updateWith(where: (ctx: ApiContext) => FilterQuery<Workspace>) {
  return async (ctx: ApiContext): Promise<void> => {
    const workspace = await findWorkspace(ctx, 'manage', where(ctx));
    const document = parseWith(updateSchema, ctx.request.body).data;
    // Tags given in an update replace the workspace's tags, as a PATCH of a relationship does.
    const tags = await tagsOf(ctx, workspace.organization.id, document);
    applyAttributes(workspace, document.attributes);
    await save(ctx, async () => {
      if (tags) await replaceTags(ctx.state.em, workspace.organization.id, workspace.id, tags);
    });
    respond(ctx, 200, await documentFor(ctx, workspace));
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
    query: WORKSPACE_LIST_QUERY,
    notes: 'Sort by `name` or `current-run.created-at` (a leading `-` reverses; workspaces without a current run come last).',
    handler: listWorkspaces,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/workspaces/:workspace_name',
    auth: 'token',
    summary: 'Show a workspace by name',
    query: { include: WORKSPACE_INCLUDES },
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
  {
    method: 'GET',
    path: '/workspaces/:workspace_id',
    auth: 'token',
    summary: 'Show a workspace',
    query: { include: WORKSPACE_INCLUDES },
    handler: showWith(byId),
  },
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
