import { prepared, runPrepared } from '@runtasks/shared/db';
import { randomBytes } from 'node:crypto';
import { toPrincipal, USER_COLUMNS, USER_JOIN, type TokenRow } from '../auth/authenticate.ts';
import type { Principal } from '../auth/principal.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { clearCookie, readCookie, setCookie } from './browser-rules.ts';

/**
 * Sessions of the run pages (docs/run-pages.md, "Sessions"). A sign-in method proves who the browser
 * is and calls `startSession` with a subject; everything after (the cookie, its rules, the lookup on
 * every request, sign-out) is the same whatever the method. Two methods: an API token
 * (sign-in.page.ts), whose session is the token's principal while the token lives, and single sign-on
 * (oidc.page.ts), whose session is the person's: their user's memberships and teams as they are at
 * each request, as a user token's principal is.
 */

/** Who a session is for, by sign-in method. A new method adds its kind here and its lookup to SESSION_PRINCIPAL. */
export type SessionSubject = { kind: 'api-token'; tokenId: string } | { kind: 'user'; userId: string };

/** The principal's `tokenId` of a person's single sign-on session (what the rate limit counts by): one per person. */
export const ssoTokenId = (userId: string): string => `sso:${userId}`;

/** A signed-in browser: the principal of its subject, and who that is in words for the page header. */
export interface PageSession {
  id: string;
  principal: Principal;
  /** The organization a token of an organization or a team belongs to (its pages' home); null for the site admin and people, who may have several. */
  organizationName: string | null;
  label: string;
}

type SessionRow = TokenRow & { organization_name: string | null; team_name: string | null; username: string | null };

/**
 * The session and its subject's principal, only while both live: a revoked or expired token ends its
 * sessions; a person's session (no token) reads as a user token of theirs would (`t`, the same columns).
 */
const SESSION_PRINCIPAL = prepared(
  'page-session-principal',
  `select t.id, t.kind, t.organization_id, t.team_id, tm.organization_id as team_org_id,
          tm.manage_run_tasks, tm.manage_workspaces, tm.manage_policy_overrides, tm.is_owners, t.expires_at, t.last_used_at,
          o.name as organization_name, tm.name as team_name, u.username, ${USER_COLUMNS}
     from page_sessions s
     join lateral (
       select k.id::text as id, k.kind::text as kind, k.organization_id, k.team_id, k.expires_at, k.last_used_at, k.user_id
         from api_tokens k where k.id = s.token_id and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())
       union all
       select 'sso:' || s.user_id, 'user', null, null, null, null, s.user_id where s.user_id is not null
     ) t on true
     left join teams tm on tm.id = t.team_id
     ${USER_JOIN}
     left join organizations o on o.id = coalesce(t.organization_id, tm.organization_id)
    where s.id_hash = $1 and s.expires_at > now()`,
);

/**
 * A new session, in place of the browser's previous one ($4, its hash, or null): it lives its
 * configured time, never past its token's expiry. Expired rows go a batch at a time.
 */
const START_SESSION = prepared(
  'page-session-start',
  `with pruned as (
     delete from page_sessions where id_hash = $4 or id_hash in (select id_hash from page_sessions where expires_at <= now() limit 100))
   insert into page_sessions (id_hash, token_id, created_at, expires_at)
   select $1, t.id, now(), least(now() + make_interval(secs => $3::double precision), coalesce(t.expires_at, 'infinity'))
     from api_tokens t where t.id = $2 and t.revoked_at is null
   returning extract(epoch from expires_at - now()) as seconds`,
);

/** A person's session (single sign-on): it lives its configured time, while the user does. */
const START_USER_SESSION = prepared(
  'page-session-start-user',
  `with pruned as (
     delete from page_sessions where id_hash = $4 or id_hash in (select id_hash from page_sessions where expires_at <= now() limit 100))
   insert into page_sessions (id_hash, user_id, created_at, expires_at)
   select $1, u.id, now(), now() + make_interval(secs => $3::double precision) from users u where u.id = $2
   returning extract(epoch from expires_at - now()) as seconds`,
);

const END_SESSION = prepared('page-session-end', 'delete from page_sessions where id_hash = $1');

function labelOf(principal: Principal, row: SessionRow): string {
  // A person is shown by their name, a site admin's own token too.
  if (row.username) return row.username;
  if (principal.kind === 'admin') return 'site admin';
  if (principal.kind === 'organization') return `owners of ${row.organization_name ?? ''}`;
  return `team ${row.team_name ?? ''} of ${row.organization_name ?? ''}`;
}

/** The browser's session, or nothing (no cookie, unknown, expired, signed out, its token revoked or expired). */
export async function currentSession(ctx: ApiContext): Promise<PageSession | undefined> {
  const id = readCookie(ctx, 'session');
  if (!id) return undefined;
  const [row] = await runPrepared<SessionRow>(await poolOf(ctx), SESSION_PRINCIPAL, [ctx.deps.secrets.hashToken(id)]);
  const principal = row && toPrincipal(row);
  if (!row || !principal) return undefined;
  return { id, principal, organizationName: row.organization_name, label: labelOf(principal, row) };
}

/**
 * Starts a session for `subject` in this browser: a new random 256-bit id in the session cookie, its
 * keyed hash in the database. Whatever session the browser held ends (a sign-in never adds a second
 * one, and an id someone planted before the sign-in is worth nothing after it), and so does the
 * sign-in form's binding. Returns false where the subject is gone meanwhile (nothing is set then).
 */
export async function startSession(ctx: ApiContext, subject: SessionSubject): Promise<boolean> {
  const previous = readCookie(ctx, 'session');
  const id = randomBytes(32).toString('base64url');
  const [row] = await runPrepared<{ seconds: number }>(await poolOf(ctx), subject.kind === 'user' ? START_USER_SESSION : START_SESSION, [
    ctx.deps.secrets.hashToken(id),
    subject.kind === 'user' ? subject.userId : subject.tokenId,
    ctx.deps.config.pagesSessionTtlSeconds,
    previous === undefined ? null : ctx.deps.secrets.hashToken(previous),
  ]);
  if (!row) return false;
  setCookie(ctx, 'session', id, Number(row.seconds));
  clearCookie(ctx, 'signIn');
  return true;
}

/** Ends the session on the server (the cookie alone would be only a request to the browser). */
export async function endSession(ctx: ApiContext, session: PageSession): Promise<void> {
  await runPrepared(await poolOf(ctx), END_SESSION, [ctx.deps.secrets.hashToken(session.id)]);
  clearCookie(ctx, 'session');
}
