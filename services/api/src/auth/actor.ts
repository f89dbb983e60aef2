import type { Principal } from './principal.ts';

/**
 * Who did something (created a run or a token, confirmed a run), as HCP shows it: a user. Callers here
 * are tokens, not people, so each principal acts as a service user of its owner, as HCP's team and
 * organization tokens do: one per team, one per organization, and one for the site admin. Its id is
 * stored (runs.created_by, runs.confirmed_by, api_tokens.created_by) and names the owner, so it stays
 * the same when the owner's token is replaced and needs no lookup to show.
 */
export type Actor = { kind: 'admin' } | { kind: 'organization'; organizationId: string } | { kind: 'team'; teamId: string };

export const SITE_ADMIN_USER_ID = 'user-site-admin';
const SERVICE_USER_PREFIX = 'user-api-';

/** The acting principal's user id. */
export function actorId(principal: Principal): string {
  if (principal.kind === 'admin') return SITE_ADMIN_USER_ID;
  return SERVICE_USER_PREFIX + (principal.kind === 'team' ? principal.teamId : principal.organizationId);
}

/** The actor a stored user id names, or null for anything else (a value from before actors were recorded). */
export function parseActor(userId: string | null | undefined): Actor | null {
  if (userId === SITE_ADMIN_USER_ID) return { kind: 'admin' };
  if (!userId?.startsWith(SERVICE_USER_PREFIX)) return null;
  const ownerId = userId.slice(SERVICE_USER_PREFIX.length);
  if (ownerId.startsWith('team-')) return { kind: 'team', teamId: ownerId };
  if (ownerId.startsWith('org-')) return { kind: 'organization', organizationId: ownerId };
  return null;
}

/** The service user's name, as HCP names them (`api-team_…`, `api-org-…`): derived from the owner's id, so renames leave it alone. */
export function actorUsername(actor: Actor): string {
  if (actor.kind === 'admin') return 'site-admin';
  return actor.kind === 'team' ? `api-${actor.teamId}` : `api-${actor.organizationId}`;
}
