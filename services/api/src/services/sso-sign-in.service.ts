import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { OrganizationMembership, Team, User } from '@runtasks/shared/db';
import { addMembership, addToTeams, createUser, findUserByEmail, normalizeEmail } from './users.service.ts';

/**
 * What a person signing in through the identity provider becomes here (docs/sso.md, "People signing
 * in to the run pages"): their user, found by their identity at the issuer, linked by a verified email
 * address, or made on their first sign-in; and, where a teams claim is configured, their teams, set
 * at every sign-in from the claim's values. The protocol is elsewhere (pages/oidc/); this takes an
 * identity that has already been verified.
 */

/** The verified identity, as this service needs it. */
export interface SsoIdentity {
  issuer: string;
  subject: string;
  email: string | null;
  emailVerified: boolean;
  preferredUsername: string | null;
  claims: Readonly<Record<string, unknown>>;
}

/** A sign-in this service will not accept although the provider vouched for the person: the reason is shown to them. */
export class SsoSignInRefused extends Error {
  readonly reason: string;
  /** A user the identity is about, where known (their organizations' audit trails record the refusal). */
  readonly userId: string | null;
  constructor(reason: string, userId: string | null = null) {
    super(reason);
    this.reason = reason;
    this.userId = userId;
  }
}

export interface TeamChange {
  organizationId: string;
  teamId: string;
  added: boolean;
}

export interface SsoSignInResult {
  user: User;
  /** `created`: made just now; `linked`: an existing user (same verified email) now known by this identity too. */
  how: 'known' | 'linked' | 'created';
  teamChanges: TeamChange[];
  /** The organizations the person is a member of after the sign-in. */
  organizationIds: string[];
}

/** A username as HCP allows them; the provider's preferred one is taken where it fits and is free. */
const USERNAME = /^[A-Za-z0-9_-]{1,200}$/;

/** The values of the teams claim: a list of strings, or one string (other values are ignored). */
export function teamClaimValues(claims: Readonly<Record<string, unknown>>, claim: string): string[] {
  const value = claims[claim];
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return [...new Set(value.filter((item): item is string => typeof item === 'string'))];
  return [];
}

async function findOrCreateUser(tx: EntityManager, identity: SsoIdentity): Promise<{ user: User; how: SsoSignInResult['how'] }> {
  const [known] = await tx.execute<{ user_id: string }[]>(`select user_id from user_identities where issuer = ? and subject = ?`, [
    identity.issuer,
    identity.subject,
  ]);
  if (known) return { user: await tx.findOneOrFail(User, { id: known.user_id }), how: 'known' };
  if (!identity.email) throw new SsoSignInRefused('The identity provider did not give an email address for you; ask its administrator.');
  const existing = await findUserByEmail(tx, identity.email);
  let user: User;
  let how: SsoSignInResult['how'];
  if (existing) {
    // Only an address the provider verified may take over an account here (else anyone could claim any address).
    if (!identity.emailVerified)
      throw new SsoSignInRefused(
        `A user with the email address ${normalizeEmail(identity.email)} exists already, and the identity provider has not verified that the address is yours.`,
        existing.id,
      );
    user = existing;
    how = 'linked';
  } else {
    const preferred = identity.preferredUsername;
    const free = preferred !== null && USERNAME.test(preferred) && (await tx.count(User, { username: preferred })) === 0;
    user = await createUser(tx, { email: identity.email, ...(free ? { username: preferred } : {}) });
    await tx.flush();
    how = 'created';
  }
  await tx.execute(`insert into user_identities (issuer, subject, user_id, created_at) values (?, ?, ?, now())`, [
    identity.issuer,
    identity.subject,
    user.id,
  ]);
  return { user, how };
}

interface OrganizationMapping {
  id: string;
  sso_team_mapping: Record<string, string> | null;
}

/**
 * Sets the person's teams from the claim's values, organization by organization:
 * - an organization with a mapping (its `sso-team-mapping` setting: claim value → team name) manages
 *   the teams the mapping names; a value it maps makes the person a member of the organization too;
 * - any other organization the person is a member of matches the values against all its team names.
 * A team the person is on but no value gives any more is left; teams a mapping does not name are kept.
 */
async function applyTeams(tx: EntityManager, user: User, values: readonly string[]): Promise<TeamChange[]> {
  const organizations = await tx.execute<OrganizationMapping[]>(
    `select o.id, o.sso_team_mapping from organizations o
      where o.id in (select organization_id from organization_memberships where user_id = ?)
         or (o.sso_team_mapping is not null and jsonb_exists_any(o.sso_team_mapping, array(select jsonb_array_elements_text(?::jsonb))))
      order by o.id`,
    [user.id, JSON.stringify(values)],
  );
  const changes: TeamChange[] = [];
  for (const organization of organizations) {
    const mapping = organization.sso_team_mapping;
    const teams = await tx.find(Team, { organization: organization.id });
    const wanted = mapping ? new Set(values.flatMap((value) => (mapping[value] === undefined ? [] : [mapping[value]]))) : new Set(values);
    const managed = mapping ? new Set(Object.values(mapping)) : undefined;
    const target = teams.filter((team) => wanted.has(team.name));
    let membership = await tx.findOne(OrganizationMembership, { organization: organization.id, user: user.id });
    if (!membership) {
      if (target.length === 0) continue;
      membership = await addMembership(tx, organization.id, user, 'active');
      await tx.flush();
    }
    const current = new Set(
      (await tx.execute<{ team_id: string }[]>(`select team_id from team_memberships where membership_id = ?`, [membership.id])).map(
        (row) => row.team_id,
      ),
    );
    const targetIds = new Set(target.map((team) => team.id));
    const leaving = teams.filter((team) => current.has(team.id) && !targetIds.has(team.id) && (!managed || managed.has(team.name)));
    if (leaving.length > 0)
      await tx.execute(`delete from team_memberships where membership_id = ? and team_id in (select jsonb_array_elements_text(?::jsonb))`, [
        membership.id,
        JSON.stringify(leaving.map((team) => team.id)),
      ]);
    const joined = await addToTeams(tx, membership, target);
    await tx.flush();
    for (const team of joined) changes.push({ organizationId: organization.id, teamId: team.id, added: true });
    for (const team of leaving) changes.push({ organizationId: organization.id, teamId: team.id, added: false });
  }
  return changes;
}

/**
 * The sign-in of a verified identity, in one transaction: the user (known, linked or created), their
 * invitations accepted (a sign-in is their first use, as a token's is), and their teams where
 * `teamsClaim` is set. A refusal (SsoSignInRefused) changes nothing.
 */
export async function signInWithSso(em: EntityManager, identity: SsoIdentity, teamsClaim: string | null): Promise<SsoSignInResult> {
  try {
    return await signInOnce(em, identity, teamsClaim);
  } catch (error) {
    // Two first sign-ins of one person at once (two tabs): the other made the user or the identity; this one now finds it.
    if (!(error instanceof UniqueConstraintViolationException)) throw error;
    em.clear();
    return signInOnce(em, identity, teamsClaim);
  }
}

function signInOnce(em: EntityManager, identity: SsoIdentity, teamsClaim: string | null): Promise<SsoSignInResult> {
  return em.transactional(async (tx) => {
    const { user, how } = await findOrCreateUser(tx, identity);
    await tx.execute(`update organization_memberships set status = 'active' where user_id = ? and status = 'invited'`, [user.id]);
    const teamChanges = teamsClaim ? await applyTeams(tx, user, teamClaimValues(identity.claims, teamsClaim)) : [];
    const organizationIds = (
      await tx.execute<{ organization_id: string }[]>(
        `select organization_id from organization_memberships where user_id = ? order by organization_id`,
        [user.id],
      )
    ).map((row) => row.organization_id);
    return { user, how, teamChanges, organizationIds };
  });
}
