import { ApiError, invalidAttribute, invalidParameter } from '@runtasks/shared/errors';
import {
  CUSTOM_DEFAULTS,
  decideTeamAccess,
  newId,
  TEAM_RUNS_ACCESS,
  TEAM_SENTINEL_MOCKS_ACCESS,
  TEAM_STATE_VERSIONS_ACCESS,
  TEAM_VARIABLES_ACCESS,
  TEAM_WORKSPACE_ACCESS,
  type CustomPermissions,
} from '@runtasks/shared/domain';
import { Team, TeamWorkspace, Workspace } from '@runtasks/shared/db';
import type { FilterQuery } from '@mikro-orm/core';
import { z } from 'zod';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeTeamWorkspace } from '../serializers/team.serializer.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { flexibleBoolean, relationshipTo, resourceDocument } from './schemas.ts';

const accessAttributes = z.object({
  access: z.enum(TEAM_WORKSPACE_ACCESS).optional(),
  runs: z.enum(TEAM_RUNS_ACCESS).optional(),
  variables: z.enum(TEAM_VARIABLES_ACCESS).optional(),
  'state-versions': z.enum(TEAM_STATE_VERSIONS_ACCESS).optional(),
  'sentinel-mocks': z.enum(TEAM_SENTINEL_MOCKS_ACCESS).optional(),
  'workspace-locking': flexibleBoolean.optional(),
  'run-tasks': flexibleBoolean.optional(),
});

const createSchema = resourceDocument(
  'team-workspaces',
  accessAttributes.default({}),
  z.object({ team: relationshipTo('teams'), workspace: relationshipTo('workspaces') }),
);
const updateSchema = resourceDocument('team-workspaces', accessAttributes.default({}), z.unknown().optional());

const permissionsOf = (row: TeamWorkspace): CustomPermissions => ({
  runs: row.runs,
  variables: row.variables,
  stateVersions: row.stateVersions,
  sentinelMocks: row.sentinelMocks,
  workspaceLocking: row.workspaceLocking,
  runTasks: row.runTasks,
});

/** HCP's rules (shared/src/domain/team-access.ts): custom permissions go with `access: custom` only. */
function applyAccess(row: TeamWorkspace, attributes: z.output<typeof accessAttributes>): void {
  const decision = decideTeamAccess({ access: row.access, permissions: permissionsOf(row) }, attributes);
  if (!decision.ok) throw invalidAttribute(`/data/attributes/${decision.attribute}`, decision.detail);
  row.access = decision.access;
  Object.assign(row, decision.permissions);
}

function ownerScope(ctx: ApiContext): { team: { organization: Record<string, unknown> } } | null {
  const organization = ownerOrganizationScope(ctx.state.principal);
  return organization && { team: { organization } };
}

async function findAccess(ctx: ApiContext): Promise<TeamWorkspace> {
  const scope = ownerScope(ctx);
  return orNotFound(
    scope && (await ctx.state.em.findOne(TeamWorkspace, { ...scope, id: ctx.params['id'] ?? '' } as FilterQuery<TeamWorkspace>)),
  );
}

async function create(ctx: ApiContext): Promise<void> {
  const { attributes, relationships } = parseWith(createSchema, ctx.request.body).data;
  const organization = orNotFound(ownerOrganizationScope(ctx.state.principal));
  const em = ctx.state.em;
  const team = orNotFound(await em.findOne(Team, { id: relationships.team.data.id, organization }));
  // The workspace must belong to the team's organization: the relationship is scoped too.
  const workspace = orNotFound(await em.findOne(Workspace, { id: relationships.workspace.data.id, organization: team.organization }));
  if (await em.count(TeamWorkspace, { team, workspace })) {
    throw new ApiError(422, 'invalid attribute', 'Team already has access to this workspace.', {
      pointer: '/data/relationships/workspace',
    });
  }
  const row = em.create(TeamWorkspace, { id: newId('teamWorkspace'), team, workspace, access: 'custom', ...CUSTOM_DEFAULTS });
  applyAccess(row, attributes);
  await em.flush();
  respond(ctx, 201, single(serializeTeamWorkspace(row)));
}

const listFilters = z.object({
  'filter[workspace][id]': z.string('must be given at most once').max(64, 'is longer than an id (64 characters)').optional(),
  'filter[team][id]': z.string('must be given at most once').max(64, 'is longer than an id (64 characters)').optional(),
});

async function list(ctx: ApiContext): Promise<void> {
  const page = parsePage(ctx.query);
  const scope = ownerScope(ctx);
  const filters = listFilters.safeParse(ctx.query);
  if (!filters.success) {
    // The first parameter at fault, named as the client spelled it.
    const [issue] = filters.error.issues;
    const parameter = String(issue?.path[0] ?? 'filter');
    throw invalidParameter(parameter, `${parameter} ${issue?.message ?? 'is not valid'}.`);
  }
  const where: Record<string, unknown> = { ...(scope ?? { id: null }) };
  if (filters.data['filter[workspace][id]']) where['workspace'] = filters.data['filter[workspace][id]'];
  if (filters.data['filter[team][id]']) where['team'] = { ...scope?.team, id: filters.data['filter[team][id]'] };
  const [rows, total] = await ctx.state.em.findAndCount(TeamWorkspace, where as FilterQuery<TeamWorkspace>, {
    orderBy: { createdAt: 'asc', id: 'asc' },
    limit: page.size,
    offset: page.offset,
  });
  respond(ctx, 200, collection(rows.map(serializeTeamWorkspace), page, total, publicRequestUrl(ctx)));
}

async function show(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(serializeTeamWorkspace(await findAccess(ctx))));
}

async function update(ctx: ApiContext): Promise<void> {
  const row = await findAccess(ctx);
  applyAccess(row, parseWith(updateSchema, ctx.request.body).data.attributes);
  await ctx.state.em.flush();
  respond(ctx, 200, single(serializeTeamWorkspace(row)));
}

async function destroy(ctx: ApiContext): Promise<void> {
  const row = await findAccess(ctx);
  await ctx.state.em.nativeDelete(TeamWorkspace, { id: row.id });
  respond(ctx, 204);
}

export const teamWorkspaceRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/team-workspaces',
    auth: 'token',
    summary: 'Give a team access to a workspace',
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/team-workspaces',
    auth: 'token',
    summary: 'List team workspace accesses',
    query: { page: true, params: Object.keys(listFilters.shape) },
    handler: list,
  },
  { method: 'GET', path: '/team-workspaces/:id', auth: 'token', summary: 'Show a team workspace access', handler: show },
  {
    method: 'PATCH',
    path: '/team-workspaces/:id',
    auth: 'token',
    summary: 'Update a team workspace access',
    requestSchema: updateSchema,
    handler: update,
  },
  { method: 'DELETE', path: '/team-workspaces/:id', auth: 'token', summary: 'Remove a team workspace access', handler: destroy },
];
