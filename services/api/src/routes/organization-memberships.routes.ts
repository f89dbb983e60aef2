import type { FilterQuery } from '@mikro-orm/core';
import { ApiError, invalidAttribute, invalidParameter, notFound } from '@runtasks/shared/errors';
import { MEMBERSHIP_STATUSES } from '@runtasks/shared/domain';
import { OrganizationMembership, Team } from '@runtasks/shared/db';
import { z } from 'zod';
import { principalsChanged } from '../auth/authenticate.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single, type Resource } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeTeam } from '../serializers/team.serializer.ts';
import { serializeMembership, serializeUser } from '../serializers/user.serializer.ts';
import { findOrganization } from '../services/organization.service.ts';
import { audit, auditingRefusals, auditTeamMembership } from '../services/audit.service.ts';
import { acceptInvitation, inviteMember, isOnOwnersTeam, removeMembership, teamsOfMemberships } from '../services/users.service.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { safeText } from './schemas.ts';

/**
 * Organization memberships (HCP's `organization-memberships`): invitations by email address, read and
 * removed by the organization's owners; a person also reads their own. docs/api.md, "People".
 */

const INCLUDES = ['user', 'teams'] as const;
const emailSchema = z.email('must be a valid email address').max(255, 'must be at most 255 characters');

/** Accepting takes no body; one may be sent (`{}`), as with other actions, but nothing else. */
const acceptSchema = z.object({}).optional();

const createSchema = z.object({
  data: z.object({
    type: z.literal('organization-memberships'),
    attributes: z.object({ email: emailSchema }),
    relationships: z
      .object({
        teams: z.object({ data: z.array(z.object({ type: z.literal('teams'), id: safeText(64).min(1) })).max(100) }).optional(),
      })
      .optional(),
  }),
});

type Include = (typeof INCLUDES)[number];

/** The memberships' documents, with their users and teams when asked for. */
async function render(
  ctx: ApiContext,
  memberships: OrganizationMembership[],
  include: ReadonlySet<Include>,
): Promise<{ data: Resource[]; included: Resource[] }> {
  const teams = await teamsOfMemberships(
    ctx.state.em,
    memberships.map((membership) => membership.id),
  );
  const data = memberships.map((membership) =>
    serializeMembership(membership, membership.organization.name, teams.get(membership.id) ?? []),
  );
  const included: Resource[] = [];
  if (include.has('user')) included.push(...uniqueById(memberships.map((membership) => serializeUser(membership.user, false))));
  if (include.has('teams')) {
    const ids = [...new Set([...teams.values()].flat())];
    const found =
      ids.length === 0 ? [] : await ctx.state.em.find(Team, { id: { $in: ids } }, { populate: ['organization'], orderBy: { id: 'asc' } });
    included.push(...found.map((team) => serializeTeam(team, team.organization.name)));
  }
  return { data, included };
}

const uniqueById = (resources: Resource[]): Resource[] => [...new Map(resources.map((resource) => [resource.id, resource])).values()];

function single1(ctx: ApiContext, status: number, rendered: { data: Resource[]; included: Resource[] }): void {
  const [resource] = rendered.data;
  respond(ctx, status, single(orNotFound(resource), rendered.included.length > 0 ? rendered.included : undefined));
}

/** `filter[email]`: comma-separated addresses, any of which matches; each must be an address. */
function emailFilter(ctx: ApiContext): string[] | undefined {
  const raw = ctx.query['filter[email]'];
  if (raw === undefined || raw === '') return undefined;
  if (Array.isArray(raw)) throw invalidParameter('filter[email]', 'filter[email] must be given at most once.');
  const emails = raw.split(',').map((email) => email.trim().toLowerCase());
  const bad = emails.find((email) => !emailSchema.safeParse(email).success);
  if (bad !== undefined)
    throw invalidParameter('filter[email]', `filter[email] must be email addresses separated by commas; '${bad}' is not one.`);
  return emails;
}

function statusFilter(ctx: ApiContext): string | undefined {
  const raw = ctx.query['filter[status]'];
  if (raw === undefined || raw === '') return undefined;
  if (typeof raw !== 'string' || !(MEMBERSHIP_STATUSES as readonly string[]).includes(raw))
    throw invalidParameter('filter[status]', `filter[status] must be one of ${MEMBERSHIP_STATUSES.join(', ')}.`);
  return raw;
}

/** `q`: the member's email address or username contains the text, in any case. */
function searchFilter(ctx: ApiContext): Record<string, unknown> {
  const q = ctx.query['q'];
  if (q === undefined || q === '') return {};
  if (typeof q !== 'string') throw invalidParameter('q', 'q must be given at most once.');
  if (q.length > 255) throw invalidParameter('q', 'q must be at most 255 characters.');
  const pattern = `%${q.replace(/[\\%_]/g, (match) => `\\${match}`)}%`;
  return { $or: [{ email: { $ilike: pattern } }, { username: { $ilike: pattern } }] };
}

async function list(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const include = parseInclude(ctx.query, INCLUDES);
  const page = parsePage(ctx.query);
  const emails = emailFilter(ctx);
  const status = statusFilter(ctx);
  const user = { ...searchFilter(ctx), ...(emails && { email: { $in: emails } }) };
  const where = {
    organization: organization.id,
    ...(status && { status }),
    ...(Object.keys(user).length > 0 && { user }),
  } as FilterQuery<OrganizationMembership>;
  const [memberships, total] = await ctx.state.em.findAndCount(OrganizationMembership, where, {
    populate: ['user', 'organization'],
    orderBy: { createdAt: 'asc', id: 'asc' },
    limit: page.size,
    offset: page.offset,
  });
  const { data, included } = await render(ctx, memberships, include);
  const document = collection(data, page, total, publicRequestUrl(ctx));
  respond(ctx, 200, included.length > 0 ? { ...document, included } : document);
}

/**
 * Invites the address; the document always includes the user, as HCP's does. A refusal (a malformed
 * address, a member already, a foreign team) is recorded in the audit trail, naming the organization.
 */
async function create(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const { membership, teams } = await auditingRefusals(
    ctx,
    organization.id,
    { type: 'organization_membership', id: organization.id },
    async () => {
      const { data } = parseWith(createSchema, ctx.request.body);
      const teamIds = (data.relationships?.teams?.data ?? []).map((team) => team.id);
      const found = teamIds.length === 0 ? [] : await ctx.state.em.find(Team, { id: { $in: teamIds }, organization: organization.id });
      const known = new Set(found.map((team) => team.id));
      const unknown = teamIds.findIndex((id) => !known.has(id));
      if (unknown >= 0) throw invalidAttribute(`/data/relationships/teams/data/${unknown}/id`, 'No team of this organization has this id.');
      return { membership: await inviteMember(ctx.state.em, organization.id, data.attributes.email, found), teams: found };
    },
  );
  const fresh = await ctx.state.em.findOneOrFail(
    OrganizationMembership,
    { id: membership.id },
    { populate: ['user', 'organization'], refresh: true },
  );
  await audit(ctx, organization.id, { type: 'organization_membership', id: fresh.id }, 'create', {
    user: fresh.user.id,
    email: fresh.user.email,
  });
  for (const team of teams)
    await auditTeamMembership(ctx, { organizationId: organization.id, teamId: team.id, userId: fresh.user.id, added: true });
  single1(ctx, 201, await render(ctx, [fresh], new Set<Include>(['user'])));
}

/** A membership the caller may read: one of an organization they own, or their own. */
async function findMembership(ctx: ApiContext, owner: boolean): Promise<OrganizationMembership> {
  const principal = ctx.state.principal;
  const owned = ownerOrganizationScope(principal);
  const mine = principal.kind === 'user' || (principal.kind === 'admin' && principal.userId) ? (principal.userId ?? null) : null;
  const id = ctx.params['organization_membership_id'] ?? '';
  const reach: Record<string, unknown>[] = [];
  if (owned) reach.push({ organization: owned });
  if (!owner && mine) reach.push({ user: mine });
  if (reach.length === 0) throw notFound();
  // An empty scope is the site admin's "any organization"; inside `$or` the ORM would drop it and leave only
  // the caller's own memberships, so a site-admin person could not read the memberships they invite.
  const anyOrganization = owned !== null && Object.keys(owned).length === 0;
  const where = (anyOrganization ? { id } : { id, $or: reach }) as FilterQuery<OrganizationMembership>;
  return orNotFound(await ctx.state.em.findOne(OrganizationMembership, where, { populate: ['user', 'organization'] }));
}

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, INCLUDES);
  single1(ctx, 200, await render(ctx, [await findMembership(ctx, false)], include));
}

/** Removes the member (and so their team memberships); an owner may not remove themself, which could leave the organization without one. */
async function destroy(ctx: ApiContext): Promise<void> {
  const membership = await findMembership(ctx, true);
  const principal = ctx.state.principal;
  const self = (principal.kind === 'user' || principal.kind === 'admin') && principal.userId === membership.user.id;
  if (self && (await isOnOwnersTeam(ctx.state.em, membership.user.id, membership.organization.id)))
    throw new ApiError(403, 'forbidden', 'An owner cannot remove themself from the organization; another owner can.');
  const teamIds = await removeMembership(ctx.state.em, membership);
  principalsChanged(ctx);
  for (const teamId of teamIds)
    await auditTeamMembership(ctx, { organizationId: membership.organization.id, teamId, userId: membership.user.id, added: false });
  respond(ctx, 204);
}

/**
 * The member accepts their invitation (`POST /organization-memberships/:id/actions/accept`, with their
 * own token): from then on their tokens reach the organization with their teams' rights. Anyone else,
 * owners included, gets the 404 of a membership that does not exist: an invitation is accepted by the
 * person invited, never on their behalf. Accepting an accepted membership changes nothing (200).
 */
async function accept(ctx: ApiContext): Promise<void> {
  parseWith(acceptSchema, ctx.request.body);
  const principal = ctx.state.principal;
  const userId = principal.kind === 'user' || principal.kind === 'admin' ? principal.userId : undefined;
  const id = ctx.params['organization_membership_id'] ?? '';
  const membership = orNotFound(
    userId ? await ctx.state.em.findOne(OrganizationMembership, { id, user: userId }, { populate: ['user', 'organization'] }) : null,
  );
  if (await acceptInvitation(ctx.state.em, membership.id)) {
    principalsChanged(ctx);
    await audit(ctx, membership.organization.id, { type: 'organization_membership', id: membership.id }, 'accept', {
      user: membership.user.id,
    });
  }
  const fresh = await ctx.state.em.findOneOrFail(
    OrganizationMembership,
    { id: membership.id },
    { populate: ['user', 'organization'], refresh: true },
  );
  single1(ctx, 200, await render(ctx, [fresh], new Set<Include>(['user'])));
}

/** The caller's own memberships, in every organization (none for a token of an organization or a team, or ADMIN_TOKEN). */
async function listOwn(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, INCLUDES);
  const page = parsePage(ctx.query);
  const principal = ctx.state.principal;
  const userId = principal.kind === 'user' || principal.kind === 'admin' ? principal.userId : undefined;
  const [memberships, total] = userId
    ? await ctx.state.em.findAndCount(
        OrganizationMembership,
        { user: userId },
        { populate: ['user', 'organization'], orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
      )
    : [[], 0];
  const { data, included } = await render(ctx, memberships, include);
  const document = collection(data, page, total, publicRequestUrl(ctx));
  respond(ctx, 200, included.length > 0 ? { ...document, included } : document);
}

export const organizationMembershipRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/organizations/:organization_name/organization-memberships',
    auth: 'token',
    summary: "List an organization's memberships (owners)",
    query: { page: true, include: INCLUDES, params: ['q', 'filter[status]', 'filter[email]'] },
    handler: list,
  },
  {
    method: 'POST',
    path: '/organizations/:organization_name/organization-memberships',
    auth: 'token',
    summary: 'Invite a person by email address (owners)',
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/organization-memberships',
    auth: 'token',
    summary: "List the caller's own memberships",
    query: { page: true, include: INCLUDES },
    handler: listOwn,
  },
  {
    method: 'GET',
    path: '/organization-memberships/:organization_membership_id',
    auth: 'token',
    summary: 'Show a membership (owners, or the member)',
    query: { include: INCLUDES },
    handler: show,
  },
  {
    method: 'POST',
    path: '/organization-memberships/:organization_membership_id/actions/accept',
    auth: 'token',
    summary: 'Accept an invitation (the invited person, with their own token)',
    requestSchema: acceptSchema,
    notes:
      "An invited membership grants nothing until its user accepts it; then their tokens reach the organization with their teams' rights. Anyone else gets a 404. Not in HCP's API (its invitations are accepted in the browser).",
    handler: accept,
  },
  {
    method: 'DELETE',
    path: '/organization-memberships/:organization_membership_id',
    auth: 'token',
    summary: 'Remove a member from the organization and its teams (owners)',
    handler: destroy,
  },
];
