import type { EntityManager } from '@mikro-orm/postgresql';
import { invalidAttribute } from '@runtasks/shared/errors';
import { newId, type MembershipStatus } from '@runtasks/shared/domain';
import { OrganizationMembership, type Organization, type Team, TeamMembership, User } from '@runtasks/shared/db';

/**
 * People: users, their organization memberships and the teams they are on (docs/design.md, "People").
 * The functions other features build on (invitations, single sign-on, notifications) are here; the
 * routes only parse, authorize and render.
 */

/** An email address as stored and compared: trimmed, in lower case. */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** The username a new user gets from their email address: its local part, with what HCP does not allow in a name replaced. */
export function usernameFromEmail(email: string): string {
  const local = normalizeEmail(email).split('@')[0] ?? '';
  const cleaned = local.replace(/[^a-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '');
  return (cleaned || 'user').slice(0, 200);
}

export async function findUserByEmail(em: EntityManager, email: string): Promise<User | null> {
  return em.findOne(User, { email: normalizeEmail(email) });
}

/**
 * A new user (persisted on the next flush of `em`, which the caller makes): `username` as given, or
 * derived from the email address and made unique with a number. A given username or email address
 * that is taken fails the flush on its unique constraint (the caller names the attribute: uniqueAs).
 */
export async function createUser(em: EntityManager, options: { email: string; username?: string; isAdmin?: boolean }): Promise<User> {
  const username = options.username ?? (await freeUsername(em, usernameFromEmail(options.email)));
  return em.create(User, { id: newId('user'), email: normalizeEmail(options.email), username, isAdmin: options.isAdmin ?? false });
}

async function freeUsername(em: EntityManager, base: string): Promise<string> {
  const taken = new Set(
    (
      await em
        .getConnection()
        .execute<{ username: string }[]>(`select username from users where username = ? or username ~ ?`, [
          base,
          `^${escapeRegex(base)}-[0-9]+$`,
        ])
    ).map((row) => row.username),
  );
  if (!taken.has(base)) return base;
  for (let suffix = 2; ; suffix += 1) if (!taken.has(`${base}-${suffix}`)) return `${base}-${suffix}`;
}

const escapeRegex = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Makes the user a member of the organization (persisted on the next flush), `invited` unless said
 * otherwise; a second membership of one user in one organization is a 422 naming `email`.
 */
export async function addMembership(
  em: EntityManager,
  organizationId: string,
  user: User,
  status: MembershipStatus = 'invited',
): Promise<OrganizationMembership> {
  if (await em.count(OrganizationMembership, { organization: organizationId, user: user.id })) {
    throw invalidAttribute('/data/attributes/email', `${user.email} is already a member of this organization.`);
  }
  return em.create(OrganizationMembership, { id: newId('organizationMembership'), organization: organizationId, user, status });
}

/** Puts the member on these teams (persisted on the next flush), skipping those they are on; every team must be of the membership's organization. */
export async function addToTeams(em: EntityManager, membership: OrganizationMembership, teams: readonly Team[]): Promise<Team[]> {
  const organizationId = membership.organization.id;
  if (teams.some((team) => team.organization.id !== organizationId)) throw new Error('a team of another organization');
  const current = new Set((await em.find(TeamMembership, { membership }, { fields: ['team'] })).map((row) => row.team.id));
  const added = teams.filter((team) => !current.has(team.id));
  for (const team of added) em.create(TeamMembership, { team, membership });
  return added;
}

/** The ids of the teams a user is on in an organization. */
export async function teamIdsOfUser(em: EntityManager, userId: string, organizationId: string): Promise<string[]> {
  const rows = await em
    .getConnection()
    .execute<{ team_id: string }[]>(
      `select x.team_id from team_memberships x join organization_memberships m on m.id = x.membership_id where m.user_id = ? and m.organization_id = ? order by x.team_id`,
      [userId, organizationId],
    );
  return rows.map((row) => row.team_id);
}

/**
 * Removes a member from the organization, and so from its teams (whose ids it returns): their tokens stop reaching it at
 * once (the principal caches are told by the table's trigger), and their sessions on the run pages
 * end (a session is a user token's: it would otherwise go on showing what they no longer reach).
 */
export async function removeMembership(em: EntityManager, membership: OrganizationMembership): Promise<string[]> {
  return em.transactional(async (tx) => {
    // The teams they leave, for the audit trail (the membership's deletion would take these rows anyway).
    const left = await tx.execute<{ team_id: string }[]>(`delete from team_memberships where membership_id = ? returning team_id`, [
      membership.id,
    ]);
    await tx.nativeDelete(OrganizationMembership, { id: membership.id });
    // Their single sign-on sessions (the person's own) and those of their tokens.
    await tx.execute(
      `delete from page_sessions s where s.user_id = ? or s.token_id in (select t.id from api_tokens t where t.user_id = ?)`,
      [membership.user.id, membership.user.id],
    );
    return left.map((row) => row.team_id).sort();
  });
}

/** The email addresses of these users, by id (ids of no user are left out): for notifications and the like. */
export async function userEmails(em: EntityManager, userIds: Iterable<string>): Promise<Map<string, string>> {
  const ids = [...new Set(userIds)];
  if (ids.length === 0) return new Map();
  const users = await em.find(User, { id: { $in: ids } }, { fields: ['id', 'email'] });
  return new Map(users.map((user) => [user.id, user.email]));
}

/**
 * Invites `email` to the organization (HCP's `POST …/organization-memberships`): the user with that
 * address, or a new one, becomes an `invited` member, on `teams` (of this organization) from the
 * start. A member already is a 422 naming `email`; nothing is written then.
 */
export async function inviteMember(
  em: EntityManager,
  organizationId: string,
  email: string,
  teams: readonly Team[],
): Promise<OrganizationMembership> {
  return em.transactional(async (tx) => {
    const user = (await findUserByEmail(tx, email)) ?? (await createUser(tx, { email }));
    const membership = await addMembership(tx, organizationId, user);
    await tx.flush();
    await addToTeams(tx, membership, teams);
    await tx.flush();
    return membership;
  });
}

/** The teams of each of these memberships, by membership id, each list in team-id order. */
export async function teamsOfMemberships(em: EntityManager, membershipIds: readonly string[]): Promise<Map<string, string[]>> {
  const teams = new Map<string, string[]>(membershipIds.map((id) => [id, []]));
  if (membershipIds.length === 0) return teams;
  const rows = await em.find(TeamMembership, { membership: { $in: [...membershipIds] } }, { orderBy: { team: 'asc' } });
  for (const row of rows) teams.get(row.membership.id)?.push(row.team.id);
  return teams;
}

/** Whether the user is on the organization's owners team. */
export async function isOnOwnersTeam(em: EntityManager, userId: string, organizationId: string): Promise<boolean> {
  const rows = await em.execute<unknown[]>(
    `select 1 from team_memberships x join organization_memberships m on m.id = x.membership_id join teams t on t.id = x.team_id
      where m.user_id = ? and m.organization_id = ? and t.is_owners limit 1`,
    [userId, organizationId],
  );
  return rows.length > 0;
}

/** The members of these teams, by team id (memberships with their users loaded), in membership-id order. */
export async function membersOfTeams(em: EntityManager, teamIds: readonly string[]): Promise<Map<string, OrganizationMembership[]>> {
  const members = new Map<string, OrganizationMembership[]>(teamIds.map((id) => [id, []]));
  if (teamIds.length === 0) return members;
  const rows = await em.find(
    TeamMembership,
    { team: { $in: [...teamIds] } },
    { populate: ['membership.user'], orderBy: { membership: 'asc' } },
  );
  for (const row of rows) members.get(row.team.id)?.push(row.membership);
  return members;
}

/** The person who creates an organization is its first member, active, on its owners team (persisted on the next flush), as in HCP. */
export function addCreator(em: EntityManager, organization: Organization, ownersTeam: Team, userId: string): void {
  const membership = em.create(OrganizationMembership, {
    id: newId('organizationMembership'),
    organization,
    user: em.getReference(User, userId),
    status: 'active',
  });
  em.create(TeamMembership, { team: ownersTeam, membership });
}

/**
 * The member accepts their invitation (HCP: an invited user is not a member until they accept): the
 * membership becomes `active`, and only then do its teams' rights reach the user's tokens (the
 * update's trigger tells API processes to forget the principals they remember). Only the member
 * accepts: the caller checks it. Returns whether it changed; an accepted membership stays as it is.
 */
export async function acceptInvitation(em: EntityManager, membershipId: string): Promise<boolean> {
  return (await em.nativeUpdate(OrganizationMembership, { id: membershipId, status: 'invited' }, { status: 'active' })) > 0;
}
