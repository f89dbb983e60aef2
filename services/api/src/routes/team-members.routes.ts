import type { FilterQuery } from '@mikro-orm/core';
import { invalidAttribute } from '@runtasks/shared/errors';
import { OrganizationMembership, Team, TeamMembership } from '@runtasks/shared/db';
import { z } from 'zod';
import { principalsChanged } from '../auth/authenticate.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { MEDIA_TYPE } from '../http/jsonapi.ts';
import { auditingRefusals, auditTeamMembership } from '../services/audit.service.ts';
import { addToTeams } from '../services/users.service.ts';
import { orNotFound, respond, type RouteDef } from './define.ts';
import { safeText } from './schemas.ts';

/**
 * A team's members (HCP's team members): added and removed by username (`…/relationships/users`, a
 * member who accepted their invitation) or by organization membership id (`…/relationships/
 * organization-memberships`, invited members too). Owners only. An unknown name or id is a 422 naming
 * the item, and nothing changes.
 */

const items = (type: string) =>
  z.object({
    data: z
      .array(z.object({ type: z.literal(type), id: safeText(255).min(1) }))
      .min(1)
      .max(100),
  });
const usersSchema = items('users');
const membershipsSchema = items('organization-memberships');

async function findTeam(ctx: ApiContext): Promise<Team> {
  const scope = ownerOrganizationScope(ctx.state.principal);
  const where = { id: ctx.params['team_id'] ?? '', organization: scope } as FilterQuery<Team>;
  return orNotFound(scope && (await ctx.state.em.findOne(Team, where, { populate: ['organization'] })));
}

/** The organization's memberships the items name, in their order; a 422 at the first that names none (or, by username, one still invited). */
async function membershipsNamed(
  ctx: ApiContext,
  team: Team,
  kind: 'users' | 'organization-memberships',
): Promise<OrganizationMembership[]> {
  const body = parseWith(kind === 'users' ? usersSchema : membershipsSchema, ctx.request.body);
  const ids = body.data.map((item) => item.id);
  const where =
    kind === 'users'
      ? { organization: team.organization.id, user: { username: { $in: ids } } }
      : { organization: team.organization.id, id: { $in: ids } };
  const found = await ctx.state.em.find(OrganizationMembership, where as FilterQuery<OrganizationMembership>, { populate: ['user'] });
  const byKey = new Map(found.map((membership) => [kind === 'users' ? membership.user.username : membership.id, membership]));
  return ids.map((id, index) => {
    const membership = byKey.get(id);
    if (!membership)
      throw invalidAttribute(
        `/data/${index}/id`,
        kind === 'users' ? `No member of this organization has the username ${id}.` : 'No membership of this organization has this id.',
      );
    if (kind === 'users' && membership.status !== 'active')
      throw invalidAttribute(`/data/${index}/id`, `${id} has not accepted the invitation yet: add their organization membership instead.`);
    return membership;
  });
}

/** membershipsNamed, with a refusal (an unknown or not yet accepted member, a bad body) recorded in the audit trail, naming the team. */
const namedOrRefused = (ctx: ApiContext, team: Team, kind: 'users' | 'organization-memberships'): Promise<OrganizationMembership[]> =>
  auditingRefusals(ctx, team.organization.id, { type: 'team_membership', id: team.id }, () => membershipsNamed(ctx, team, kind));

/** One audit event per member who joined or left the team. */
async function auditMembers(ctx: ApiContext, team: Team, memberships: readonly OrganizationMembership[], added: boolean): Promise<void> {
  for (const membership of memberships)
    await auditTeamMembership(ctx, { organizationId: team.organization.id, teamId: team.id, userId: membership.user.id, added });
}

function routesFor(kind: 'users' | 'organization-memberships'): RouteDef[] {
  const path = `/teams/:team_id/relationships/${kind}`;
  const add = async (ctx: ApiContext): Promise<void> => {
    const team = await findTeam(ctx);
    const memberships = await namedOrRefused(ctx, team, kind);
    const added: OrganizationMembership[] = [];
    for (const membership of memberships) if ((await addToTeams(ctx.state.em, membership, [team])).length > 0) added.push(membership);
    await ctx.state.em.flush();
    principalsChanged(ctx);
    await auditMembers(ctx, team, added, true);
    respond(ctx, 204);
  };
  const remove = async (ctx: ApiContext): Promise<void> => {
    const team = await findTeam(ctx);
    const memberships = await namedOrRefused(ctx, team, kind);
    const where = { team: team.id, membership: { $in: memberships.map((membership) => membership.id) } };
    // Only those on the team are removed, and audited.
    const on = new Set((await ctx.state.em.find(TeamMembership, where, { fields: ['membership'] })).map((row) => row.membership.id));
    await ctx.state.em.nativeDelete(TeamMembership, where);
    principalsChanged(ctx);
    await auditMembers(
      ctx,
      team,
      memberships.filter((membership) => on.has(membership.id)),
      false,
    );
    respond(ctx, 204);
  };
  const list = async (ctx: ApiContext): Promise<void> => {
    const team = await findTeam(ctx);
    const rows = await ctx.state.em.find(
      TeamMembership,
      { team: team.id },
      { populate: ['membership.user'], orderBy: { membership: 'asc' } },
    );
    const ids = rows.map((row) => (kind === 'users' ? row.membership.user.username : row.membership.id));
    // Resource identifiers, as a JSON:API relationship's own document has them.
    ctx.status = 200;
    ctx.type = MEDIA_TYPE;
    ctx.body = { data: ids.map((id) => ({ type: kind, id })) };
  };
  const body = kind === 'users' ? usersSchema : membershipsSchema;
  const what = kind === 'users' ? 'by username' : 'by organization membership id';
  return [
    {
      method: 'GET',
      path,
      auth: 'token',
      summary: `List a team's members ${what} (owners)`,
      response: { status: 200, content: 'json' },
      handler: list,
    },
    {
      method: 'POST',
      path,
      auth: 'token',
      summary: `Add members to a team ${what} (owners)`,
      requestSchema: body,
      response: { status: 204, content: 'none' },
      handler: add,
    },
    { method: 'DELETE', path, auth: 'token', summary: `Remove members from a team ${what} (owners)`, requestSchema: body, handler: remove },
  ];
}

export const teamMemberRoutes: RouteDef[] = [...routesFor('users'), ...routesFor('organization-memberships')];
