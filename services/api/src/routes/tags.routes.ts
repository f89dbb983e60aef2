import type { FilterQuery } from '@mikro-orm/core';
import { invalidAttribute, invalidParameter, notFound } from '@runtasks/shared/errors';
import { Workspace } from '@runtasks/shared/db';
import { organizationsWhere } from '../auth/principal.ts';
import { canCreateWorkspaces, workspaceScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { collection, parsePage, type Page } from '../http/pagination.ts';
import { serializeTag } from '../serializers/tag.serializer.ts';
import { findOrganization } from '../services/organization.service.ts';
import {
  deleteOrganizationTags,
  findTag,
  linkTags,
  organizationTags,
  resolveTags,
  unlinkTags,
  workspaceTags,
  type TagRow,
} from '../services/tag.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { publicRequestUrl, respond, type RouteDef } from './define.ts';
import { tagIdsDocument, tagListDocument, workspaceIdsDocument } from './tag-schemas.ts';

/**
 * HCP's workspace tags and organization tags. Reading a workspace's tags takes reading the workspace;
 * tagging and untagging it take what updating it takes. An organization's tags are listed to its
 * members; deleting them, or tagging workspaces from the tag's side, takes managing its workspaces.
 */

type Query = Record<string, string | string[] | undefined>;

function optionalParameter(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw invalidParameter(name, `${name} must be given at most once.`);
  if (value !== undefined && value.length > 255) throw invalidParameter(name, `${name} must be at most 255 characters.`);
  return value === '' ? undefined : value;
}

const workspaceById = (ctx: ApiContext): FilterQuery<Workspace> => ({ id: ctx.params['workspace_id'] ?? '' });

function respondWithTags(ctx: ApiContext, found: { rows: TagRow[]; total: number }, page: Page): void {
  respond(ctx, 200, collection(found.rows.map(serializeTag), page, found.total, publicRequestUrl(ctx)));
}

async function listWorkspaceTags(ctx: ApiContext): Promise<void> {
  const workspace = await findWorkspace(ctx, 'read', workspaceById(ctx));
  const query = ctx.query as Query;
  const page = parsePage(query);
  respondWithTags(ctx, await workspaceTags(ctx.state.em, workspace.id, optionalParameter(query, 'name'), page), page);
}

/** The workspace is found (404) before the body is read, so a caller without the right learns nothing from it. */
async function addWorkspaceTags(ctx: ApiContext): Promise<void> {
  const workspace = await findWorkspace(ctx, 'manage', workspaceById(ctx));
  const { data } = parseWith(tagListDocument, ctx.request.body);
  const organizationId = workspace.organization.id;
  const tags = await resolveTags(ctx.state.em, organizationId, data, (index) => `/data/${index}`);
  await linkTags(ctx.state.em, organizationId, [workspace.id], tags);
  respond(ctx, 204);
}

/** Tags named that the workspace does not have, or that do not exist, are no error: removing is idempotent. */
async function removeWorkspaceTags(ctx: ApiContext): Promise<void> {
  const workspace = await findWorkspace(ctx, 'manage', workspaceById(ctx));
  const { data } = parseWith(tagListDocument, ctx.request.body);
  const tags = {
    ids: data.flatMap((tag) => (tag.id === undefined ? [] : [tag.id])),
    names: data.flatMap((tag) => (tag.id === undefined && tag.attributes?.name ? [tag.attributes.name] : [])),
  };
  await unlinkTags(ctx.state.em, workspace.organization.id, workspace.id, tags);
  respond(ctx, 204);
}

async function listOrganizationTags(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx);
  const query = ctx.query as Query;
  const page = parsePage(query);
  const q = optionalParameter(query, 'q');
  const exclude = optionalParameter(query, 'filter[exclude][taggable][id]');
  respondWithTags(ctx, await organizationTags(ctx.state.em, organization.id, q, exclude, page), page);
}

async function deleteTags(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx);
  if (!canCreateWorkspaces(ctx.state.principal, organization.id)) throw notFound();
  const { data } = parseWith(tagIdsDocument, ctx.request.body);
  await deleteOrganizationTags(
    ctx.state.em,
    organization.id,
    data.map((tag) => tag.id),
  );
  respond(ctx, 204);
}

/** Every workspace must be one of the tag's organization the caller may manage, else a 422 naming the first that is not. */
async function addTagToWorkspaces(ctx: ApiContext): Promise<void> {
  const tag = await findTag(
    ctx.state.em,
    ctx.params['tag_id'] ?? '',
    organizationsWhere(ctx.state.principal, () => true),
  );
  const manage = workspaceScope(ctx.state.principal, 'manage');
  if (!tag || !manage) throw notFound();
  const ids = parseWith(workspaceIdsDocument, ctx.request.body).data.map((workspace) => workspace.id);
  const where = { $and: [manage, { id: { $in: ids }, organization: tag.organization_id }] } as FilterQuery<Workspace>;
  const found = new Set((await ctx.state.em.find(Workspace, where, { fields: ['id'] })).map((workspace) => workspace.id));
  const unknown = ids.findIndex((id) => !found.has(id));
  if (unknown >= 0) throw invalidAttribute(`/data/${unknown}/id`, 'No workspace of this organization that you may manage has this id.');
  await linkTags(ctx.state.em, tag.organization_id, [...found], { ids: [tag.id], names: [] });
  respond(ctx, 204);
}

export const tagRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/relationships/tags',
    auth: 'token',
    summary: "List a workspace's tags",
    query: { page: true, params: ['name'] },
    notes: 'Sorted by name; `name` keeps the tags whose name contains it.',
    handler: listWorkspaceTags,
  },
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/relationships/tags',
    auth: 'token',
    summary: 'Tag a workspace',
    notes: 'Tags by id or by name; a new name creates the tag in the organization. Tags the workspace has stay.',
    requestSchema: tagListDocument,
    response: { status: 204, content: 'none' },
    handler: addWorkspaceTags,
  },
  {
    method: 'DELETE',
    path: '/workspaces/:workspace_id/relationships/tags',
    auth: 'token',
    summary: 'Untag a workspace',
    notes: 'Tags by id or by name; tags the workspace does not have are ignored. The tags stay in the organization.',
    requestSchema: tagListDocument,
    handler: removeWorkspaceTags,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/tags',
    auth: 'token',
    summary: "List an organization's tags",
    query: { page: true, params: ['q', 'filter[exclude][taggable][id]'] },
    notes: 'Sorted by name; `q` keeps names containing it; `filter[exclude][taggable][id]` leaves out the tags of that workspace.',
    handler: listOrganizationTags,
  },
  {
    method: 'DELETE',
    path: '/organizations/:organization_name/tags',
    auth: 'token',
    summary: "Delete an organization's tags",
    notes: 'Removes them from every workspace. Takes the permission to manage workspaces.',
    requestSchema: tagIdsDocument,
    handler: deleteTags,
  },
  {
    method: 'POST',
    path: '/tags/:tag_id/relationships/workspaces',
    auth: 'token',
    summary: 'Tag workspaces with a tag',
    notes: 'Takes the permission to manage workspaces.',
    requestSchema: workspaceIdsDocument,
    response: { status: 204, content: 'none' },
    handler: addTagToWorkspaces,
  },
];
