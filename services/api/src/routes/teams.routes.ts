import type { FilterQuery } from '@mikro-orm/core';
import { ApiError, invalidAttribute, invalidParameter } from '@runtasks/shared/errors';
import { newId, TEAM_VISIBILITIES } from '@runtasks/shared/domain';
import { OWNERS_TEAM_NAME, Team, type OrganizationMembership } from '@runtasks/shared/db';
import { z } from 'zod';
import { principalsChanged } from '../auth/authenticate.ts';
import { teamPermissions } from '../auth/permissions.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeTeam } from '../serializers/team.serializer.ts';
import { serializeMembership, serializeUser } from '../serializers/user.serializer.ts';
import { membersOfTeams } from '../services/users.service.ts';
import { parseInclude } from '../http/include.ts';
import { orNotFound, publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';
import { flexibleBoolean, noRelationships, resourceDocument, safeText } from './schemas.ts';
import { applyOrganizationAccess, organizationAccessSchema } from './team-organization-access.ts';

const teamName = safeText(255).min(1, 'must not be empty');

const visibility = z.enum(TEAM_VISIBILITIES).optional();

/** HCP's team settings besides the name; there are no user members here, so token management by members is stored only. */
const settings = {
  'organization-access': organizationAccessSchema,
  visibility,
  'sso-team-id': safeText(255).nullable().optional(),
  'allow-member-token-management': flexibleBoolean.optional(),
};

const createSchema = resourceDocument('teams', z.object({ name: teamName, ...settings }), noRelationships);
const updateSchema = resourceDocument('teams', z.object({ name: teamName.optional(), ...settings }).default({}), noRelationships);

function applySettings(team: Team, attributes: z.output<typeof updateSchema>['data']['attributes']): void {
  if (attributes.visibility !== undefined) team.visibility = attributes.visibility;
  if (attributes['sso-team-id'] !== undefined) team.ssoTeamId = attributes['sso-team-id'];
  if (attributes['allow-member-token-management'] !== undefined)
    team.allowMemberTokenManagement = attributes['allow-member-token-management'];
  applyOrganizationAccess(team, attributes['organization-access']);
}

/** The owners team keeps its name and every organization-level right: refuse a change by name. */
function refuseOwnersChange(team: Team, attributes: z.output<typeof updateSchema>['data']['attributes']): void {
  if (!team.isOwners) return;
  if (attributes.name !== undefined && attributes.name !== OWNERS_TEAM_NAME)
    throw invalidAttribute('/data/attributes/name', 'The owners team cannot be renamed.');
  const access = attributes['organization-access'] ?? {};
  for (const [key, value] of Object.entries(access)) {
    if (value === false)
      throw invalidAttribute(`/data/attributes/organization-access/${key}`, 'The owners team keeps every organization-level permission.');
  }
}

/** A team's document: `members` where it may have some (a new team has none). */
const withPermissions = (
  ctx: ApiContext,
  team: Team,
  organization: { id: string; name: string },
  members: readonly OrganizationMembership[] = [],
) =>
  serializeTeam(team, organization.name, teamPermissions(ctx.state.principal, organization.id, team.isOwners), {
    userIds: members.map((member) => member.user.id),
    membershipIds: members.map((member) => member.id),
  });

const TEAM_INCLUDES = ['users', 'organization_memberships'] as const;

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
  applySettings(team, attributes);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  respond(ctx, 201, single(withPermissions(ctx, team, organization)));
}

const listQuery = z.object({
  // go-tfe joins the names with commas; a name may not be empty.
  'filter[names]': z
    .string('must be given at most once')
    .transform((value) => value.split(','))
    .refine((names) => names.every((name) => name.length > 0 && name.length <= 255), 'must be team names separated by commas')
    .optional(),
  q: z.string('must be given at most once').max(255, 'must be at most 255 characters').optional(),
});

/** `filter[names]`: exactly these names; `q`: names containing the text, in any case. */
function listFilter(ctx: ApiContext): Record<string, unknown> {
  const parsed = listQuery.safeParse(ctx.query);
  if (!parsed.success) {
    const [issue] = parsed.error.issues;
    const parameter = String(issue?.path[0] ?? 'filter');
    throw invalidParameter(parameter, `${parameter} ${issue?.message ?? 'is not valid'}.`);
  }
  const name: Record<string, unknown> = {};
  if (parsed.data['filter[names]']) name['$in'] = parsed.data['filter[names]'];
  // The text is matched as text: LIKE's wildcards and its escape character are escaped.
  if (parsed.data.q) name['$ilike'] = `%${parsed.data.q.replace(/[\\%_]/g, (match) => `\\${match}`)}%`;
  return Object.keys(name).length > 0 ? { name } : {};
}

async function list(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const page = parsePage(ctx.query);
  const [teams, total] = await ctx.state.em.findAndCount(Team, { organization: organization.id, ...listFilter(ctx) } as FilterQuery<Team>, {
    orderBy: { createdAt: 'asc', id: 'asc' },
    limit: page.size,
    offset: page.offset,
  });
  const members = await membersOfTeams(
    ctx.state.em,
    teams.map((team) => team.id),
  );
  respond(
    ctx,
    200,
    collection(
      teams.map((team) => withPermissions(ctx, team, organization, members.get(team.id))),
      page,
      total,
      publicRequestUrl(ctx),
    ),
  );
}

/** `include=users` and `include=organization-memberships` list the members, as go-tfe's TeamMembers reads them. */
async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, TEAM_INCLUDES);
  const team = await findTeam(ctx);
  const members = (await membersOfTeams(ctx.state.em, [team.id])).get(team.id) ?? [];
  const included = [
    ...(include.has('users') ? members.map((member) => serializeUser(member.user, false)) : []),
    ...(include.has('organization_memberships')
      ? members.map((member) => serializeMembership(member, team.organization.name, [team.id]))
      : []),
  ];
  respond(ctx, 200, single(withPermissions(ctx, team, team.organization, members), included.length > 0 ? included : undefined));
}

async function update(ctx: ApiContext): Promise<void> {
  const team = await findTeam(ctx);
  const { attributes } = parseWith(updateSchema, ctx.request.body).data;
  refuseOwnersChange(team, attributes);
  if (attributes.name !== undefined) team.name = attributes.name;
  applySettings(team, attributes);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  // Its tokens' permissions may have changed.
  principalsChanged(ctx);
  const members = (await membersOfTeams(ctx.state.em, [team.id])).get(team.id);
  respond(ctx, 200, single(withPermissions(ctx, team, team.organization, members)));
}

async function destroy(ctx: ApiContext): Promise<void> {
  const team = await findTeam(ctx);
  if (team.isOwners) throw new ApiError(422, 'invalid request', 'The owners team cannot be deleted.');
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
    query: { page: true, params: ['filter[names]', 'q'] },
    handler: list,
  },
  {
    method: 'GET',
    path: '/teams/:team_id',
    auth: 'token',
    summary: 'Show a team',
    query: { include: TEAM_INCLUDES },
    handler: show,
  },
  { method: 'PATCH', path: '/teams/:team_id', auth: 'token', summary: 'Update a team', requestSchema: updateSchema, handler: update },
  { method: 'DELETE', path: '/teams/:team_id', auth: 'token', summary: 'Delete a team', handler: destroy },
];
