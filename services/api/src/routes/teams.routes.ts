import type { FilterQuery } from '@mikro-orm/core';
import { newId, Team } from '@runtasks/shared';
import { z } from 'zod';
import { principalsChanged } from '../auth/authenticate.ts';
import { teamPermissions } from '../auth/permissions.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeTeam } from '../serializers/team.serializer.ts';
import { orNotFound, publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { findOrganization } from './organizations.routes.ts';
import { flexibleBoolean, noRelationships, resourceDocument, safeText } from './schemas.ts';

const organizationAccess = z
  .object({
    'manage-run-tasks': flexibleBoolean.optional(),
    'manage-workspaces': flexibleBoolean.optional(),
    'manage-policy-overrides': flexibleBoolean.optional(),
  })
  .optional();

const teamName = safeText(255).min(1, 'must not be empty');

const createSchema = resourceDocument('teams', z.object({ name: teamName, 'organization-access': organizationAccess }), noRelationships);
const updateSchema = resourceDocument(
  'teams',
  z.object({ name: teamName.optional(), 'organization-access': organizationAccess }).default({}),
  noRelationships,
);

type AccessInput = z.output<typeof organizationAccess>;

function applyAccess(team: Team, access: AccessInput): void {
  if (access?.['manage-run-tasks'] !== undefined) team.manageRunTasks = access['manage-run-tasks'];
  if (access?.['manage-workspaces'] !== undefined) team.manageWorkspaces = access['manage-workspaces'];
  if (access?.['manage-policy-overrides'] !== undefined) team.managePolicyOverrides = access['manage-policy-overrides'];
}

/** Teams are managed by owners only; the team is loaded with its organization in one scoped query. */
async function findTeam(ctx: ApiContext): Promise<Team> {
  const scope = ownerOrganizationScope(ctx.state.principal);
  const team =
    scope &&
    (await ctx.state.em.findOne(Team, { id: ctx.params['team_id'] ?? '', organization: scope } as FilterQuery<Team>, {
      populate: ['organization'],
    }));
  return orNotFound(team);
}

async function create(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const { attributes } = parseWith(createSchema, ctx.request.body).data;
  const team = ctx.state.em.create(Team, { id: newId('team'), organization, name: attributes.name });
  applyAccess(team, attributes['organization-access']);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  respond(ctx, 201, single(serializeTeam(team, organization.name, teamPermissions(ctx.state.principal, organization.id))));
}

async function list(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const page = parsePage(ctx.query);
  const [teams, total] = await ctx.state.em.findAndCount(
    Team,
    { organization: organization.id },
    { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
  );
  respond(
    ctx,
    200,
    collection(
      teams.map((team) => serializeTeam(team, organization.name, teamPermissions(ctx.state.principal, organization.id))),
      page,
      total,
      publicRequestUrl(ctx),
    ),
  );
}

async function show(ctx: ApiContext): Promise<void> {
  const team = await findTeam(ctx);
  respond(ctx, 200, single(serializeTeam(team, team.organization.name, teamPermissions(ctx.state.principal, team.organization.id))));
}

async function update(ctx: ApiContext): Promise<void> {
  const team = await findTeam(ctx);
  const { attributes } = parseWith(updateSchema, ctx.request.body).data;
  if (attributes.name !== undefined) team.name = attributes.name;
  applyAccess(team, attributes['organization-access']);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  // Its tokens' permissions may have changed.
  principalsChanged(ctx);
  respond(ctx, 200, single(serializeTeam(team, team.organization.name, teamPermissions(ctx.state.principal, team.organization.id))));
}

async function destroy(ctx: ApiContext): Promise<void> {
  const team = await findTeam(ctx);
  await ctx.state.em.nativeDelete(Team, { id: team.id });
  principalsChanged(ctx);
  respond(ctx, 204);
}

export const teamRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/organizations/:organization_name/teams',
    auth: 'token',
    summary: 'Create a team',
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/teams',
    auth: 'token',
    summary: "List an organization's teams",
    query: { page: true },
    handler: list,
  },
  { method: 'GET', path: '/teams/:team_id', auth: 'token', summary: 'Show a team', handler: show },
  { method: 'PATCH', path: '/teams/:team_id', auth: 'token', summary: 'Update a team', requestSchema: updateSchema, handler: update },
  { method: 'DELETE', path: '/teams/:team_id', auth: 'token', summary: 'Delete a team', handler: destroy },
];
