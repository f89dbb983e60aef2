import { prepared, runPrepared } from '@runtasks/shared/db';
import { randomBytes } from 'node:crypto';
import { lookUpToken, toPrincipal, type TokenRow } from '../auth/authenticate.ts';
import type { Principal } from '../auth/principal.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { clearCookie, readCookie, SESSION_COOKIE, setCookie } from './cookies.ts';

/** A signed-in browser: the principal of its token, and who that is in words for the page header. */
export interface PageSession {
  id: string;
  principal: Principal;
  /** The organization a non-admin principal belongs to (its pages' home). */
  organizationName: string | null;
  label: string;
}

type SessionRow = TokenRow & { organization_name: string | null; team_name: string | null };

/** The session and its token's principal, only while both live: a revoked or expired token ends its sessions. */
const SESSION_PRINCIPAL = prepared(
  'page-session-principal',
  `select t.id, t.kind, t.organization_id, t.team_id, tm.organization_id as team_org_id,
          tm.manage_run_tasks, tm.manage_workspaces, tm.manage_policy_overrides, t.expires_at, t.last_used_at,
          o.name as organization_name, tm.name as team_name
     from page_sessions s
     join api_tokens t on t.id = s.token_id
     left join teams tm on tm.id = t.team_id
     left join organizations o on o.id = coalesce(t.organization_id, tm.organization_id)
    where s.id_hash = $1 and s.expires_at > now() and t.revoked_at is null and (t.expires_at is null or t.expires_at > now())`,
);

/** A new session lives its configured time, never past its token's expiry. Expired rows go a batch at a time. */
const CREATE_SESSION = prepared(
  'page-session-create',
  `with pruned as (
     delete from page_sessions where id_hash in (select id_hash from page_sessions where expires_at <= now() limit 100))
   insert into page_sessions (id_hash, token_id, created_at, expires_at)
   select $1, t.id, now(), least(now() + make_interval(secs => $3::double precision), coalesce(t.expires_at, 'infinity'))
     from api_tokens t where t.id = $2
   returning extract(epoch from expires_at - now()) as seconds`,
);

const END_SESSION = prepared('page-session-end', 'delete from page_sessions where id_hash = $1');

function labelOf(principal: Principal, row: SessionRow): string {
  if (principal.kind === 'admin') return 'site admin';
  if (principal.kind === 'organization') return `owners of ${row.organization_name ?? ''}`;
  return `team ${row.team_name ?? ''} of ${row.organization_name ?? ''}`;
}

/** The browser's session, or nothing (no cookie, unknown, expired, signed out, its token revoked or expired). */
export async function currentSession(ctx: ApiContext): Promise<PageSession | undefined> {
  const id = readCookie(ctx, SESSION_COOKIE);
  if (!id) return undefined;
  const [row] = await runPrepared<SessionRow>(await poolOf(ctx), SESSION_PRINCIPAL, [ctx.deps.secrets.hashToken(id)]);
  const principal = row && toPrincipal(row);
  if (!row || !principal) return undefined;
  return { id, principal, organizationName: row.organization_name, label: labelOf(principal, row) };
}

/**
 * Signs the browser in with an API token: a new random session id in an HttpOnly cookie, its keyed
 * hash in the database. Returns the principal, or nothing when the token is not a live API token.
 */
export async function signIn(ctx: ApiContext, token: string): Promise<Principal | undefined> {
  const pool = await poolOf(ctx);
  const known = await lookUpToken(pool, ctx.deps.secrets.hashToken(token));
  if (!known) return undefined;
  const id = randomBytes(32).toString('base64url');
  const [row] = await runPrepared<{ seconds: number }>(pool, CREATE_SESSION, [
    ctx.deps.secrets.hashToken(id),
    known.tokenId,
    ctx.deps.config.pagesSessionTtlSeconds,
  ]);
  if (!row) return undefined;
  setCookie(ctx, SESSION_COOKIE, id, Number(row.seconds));
  return known.principal;
}

/** Ends the session on the server (the cookie alone would be only a request to the browser). */
export async function signOut(ctx: ApiContext, session: PageSession | undefined): Promise<void> {
  if (session) await runPrepared(await poolOf(ctx), END_SESSION, [ctx.deps.secrets.hashToken(session.id)]);
  clearCookie(ctx, SESSION_COOKIE);
}
