import type { ActedBy } from '@runtasks/shared/domain';
import type { Principal } from './principal.ts';

/**
 * Who did something (created a run or a token, confirmed a run), as HCP shows it: a user. Callers here
 * are tokens, not people, so each principal acts as a service user of its owner, as HCP's team and
 * organization tokens do: one per team, one per organization, and one for the site admin. Its id is
 * stored (runs.created_by, runs.confirmed_by, api_tokens.created_by) and names the owner, so it stays
 * the same when the owner's token is replaced and needs no lookup to show.
 */
export type ServiceActor =
  | { kind: 'admin' }
  | { kind: 'organization'; organizationId: string }
  | { kind: 'team'; teamId: string }
  | { kind: 'pipeline'; ruleId: string };
/** A person (a user token, or a site admin's) acts as themself: their own user id. */
export type Actor = ServiceActor | { kind: 'user'; userId: string };

export const SITE_ADMIN_USER_ID = 'user-site-admin';
const SERVICE_USER_PREFIX = 'user-api-';
/** A person's id (`newId('user')`): never a service user's, whose ids have a second hyphen. */
const PERSON_ID = /^user-[A-Za-z0-9]{16}$/;

/** The acting principal's user id. */
export function actorId(principal: Principal): string {
  if (principal.kind === 'user') return principal.userId;
  if (principal.kind === 'admin') return principal.userId ?? SITE_ADMIN_USER_ID;
  // A pipeline acts as the service user of the trust rule it came in under.
  if (principal.kind === 'pipeline') return SERVICE_USER_PREFIX + principal.tokenId;
  return SERVICE_USER_PREFIX + (principal.kind === 'team' ? principal.teamId : principal.organizationId);
}

/** Who acts in a request, with the comment it gave (the engine records both with the action). */
export const actedBy = (principal: Principal, comment?: string | null): ActedBy => ({ actorId: actorId(principal), comment });

/** The actor a stored user id names, or null for anything else (a value from before actors were recorded). */
export function parseActor(userId: string | null | undefined): Actor | null {
  if (userId === SITE_ADMIN_USER_ID) return { kind: 'admin' };
  if (userId && PERSON_ID.test(userId)) return { kind: 'user', userId };
  if (!userId?.startsWith(SERVICE_USER_PREFIX)) return null;
  const ownerId = userId.slice(SERVICE_USER_PREFIX.length);
  if (ownerId.startsWith('team-')) return { kind: 'team', teamId: ownerId };
  if (ownerId.startsWith('org-')) return { kind: 'organization', organizationId: ownerId };
  if (ownerId.startsWith('ctr-')) return { kind: 'pipeline', ruleId: ownerId };
  return null;
}

/** The service user's name, as HCP names them (`api-team_…`, `api-org-…`): derived from the owner's id, so renames leave it alone. */
export function actorUsername(actor: ServiceActor): string {
  if (actor.kind === 'admin') return 'site-admin';
  if (actor.kind === 'pipeline') return `api-${actor.ruleId}`;
  return actor.kind === 'team' ? `api-${actor.teamId}` : `api-${actor.organizationId}`;
}
