import { CALLBACK_TOKEN_PREFIX, isPlausibleToken, nativePool, prepared, runPrepared, unauthorized, type Queryable } from '@runtasks/shared';
import type { Next } from 'koa';
import type { ApiContext } from '../context.ts';
import type { Principal } from './principal.ts';

interface TokenRow {
  id: string;
  kind: 'admin' | 'organization' | 'team';
  organization_id: string | null;
  team_id: string | null;
  team_org_id: string | null;
  manage_run_tasks: boolean | null;
  manage_workspaces: boolean | null;
  manage_policy_overrides: boolean | null;
  last_used_at: Date | null;
}

const LAST_USED_RESOLUTION_MS = 60_000;

export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer ([^\s]+)$/i.exec(header ?? '');
  return match?.[1];
}

function toPrincipal(row: TokenRow): Principal | undefined {
  if (row.kind === 'admin') return { kind: 'admin', tokenId: row.id };
  if (row.kind === 'organization' && row.organization_id)
    return { kind: 'organization', tokenId: row.id, organizationId: row.organization_id };
  if (row.kind === 'team' && row.team_id && row.team_org_id) {
    return {
      kind: 'team',
      tokenId: row.id,
      organizationId: row.team_org_id,
      teamId: row.team_id,
      manageRunTasks: row.manage_run_tasks === true,
      manageWorkspaces: row.manage_workspaces === true,
      managePolicyOverrides: row.manage_policy_overrides === true,
    };
  }
  return undefined;
}

const TOKEN_PRINCIPAL = prepared(
  'token-principal',
  `select t.id, t.kind, t.organization_id, t.team_id, tm.organization_id as team_org_id,
          tm.manage_run_tasks, tm.manage_workspaces, tm.manage_policy_overrides, t.last_used_at
     from api_tokens t left join teams tm on tm.id = t.team_id
    where t.token_hash = $1 and t.revoked_at is null and (t.expires_at is null or t.expires_at > now())`,
);

const TOKEN_USED = prepared('token-used', 'update api_tokens set last_used_at = now() where id = $1');

/** Resolves the bearer token to a principal in one query; every failure is the same 401. */
export async function authenticate(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (!token || !isPlausibleToken(token)) throw unauthorized();
  const pool = await nativePool(ctx.state.em);
  const [row] = await runPrepared<TokenRow>(pool, TOKEN_PRINCIPAL, [ctx.deps.secrets.hashToken(token)]);
  const principal = row && toPrincipal(row);
  if (!row || !principal) throw unauthorized();
  ctx.state.principal = principal;
  if (!row.last_used_at || Date.now() - new Date(row.last_used_at).getTime() > LAST_USED_RESOLUTION_MS) {
    // Bookkeeping only: never delay or fail the request for it.
    runPrepared(pool, TOKEN_USED, [row.id]).catch(() => undefined);
  }
  await next();
}

/**
 * A task result's access token, valid while its result is open and before its hard deadline; it
 * is accepted only where a route asks for it (its callback and its run's plan JSON).
 */
export async function resolveTaskAccess(
  ctx: ApiContext,
  token: string,
): Promise<{ resultId: string; runId: string; status: string } | undefined> {
  const rows: { id: string; run_id: string; status: string }[] = await ctx.state.em.execute(
    `select tr.id, ts.run_id, tr.status from task_results tr join task_stages ts on ts.id = tr.task_stage_id
      where tr.callback_token_hash = ? and (tr.hard_deadline is null or tr.hard_deadline > now())`,
    [ctx.deps.secrets.hashToken(token)],
  );
  const row = rows[0];
  return row && { resultId: row.id, runId: row.run_id, status: row.status };
}

const CALLBACK_ACCESS = prepared(
  'callback-access',
  `select id, status, (hard_deadline is not null and hard_deadline <= now()) as expired
     from task_results where id = $1 and callback_token_hash = $2`,
);

/** A result by its id and its access token's hash: whether the token is its, and whether the result may still change. */
export async function readCallbackAccess(
  client: Queryable,
  resultId: string,
  tokenHash: string,
): Promise<{ id: string; status: string; expired: boolean } | undefined> {
  const [row] = await runPrepared<{ id: string; status: string; expired: boolean }>(client, CALLBACK_ACCESS, [resultId, tokenHash]);
  return row;
}

/**
 * `callback` routes: the result's own access token, checked before the body is read (a 401 never
 * depends on the body, and no unauthenticated body is parsed). What it finds lets the handler refuse a
 * final or expired result before reading the body; the handler's statement checks all of it again.
 */
export async function authenticateCallback(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (!token || !isPlausibleToken(token)) throw unauthorized();
  const row = await readCallbackAccess(
    await nativePool(ctx.state.em),
    ctx.params['task_result_id'] ?? '',
    ctx.deps.secrets.hashToken(token),
  );
  if (!row) throw unauthorized();
  ctx.state.callbackAccess = { resultId: row.id, status: row.status, expired: row.expired };
  await next();
}

export async function authenticateTokenOrTask(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (token?.startsWith(CALLBACK_TOKEN_PREFIX)) {
    const access = await resolveTaskAccess(ctx, token);
    // Dead once its result is final.
    if (!access || !['pending', 'running'].includes(access.status)) throw unauthorized();
    ctx.state.taskAccess = { resultId: access.resultId, runId: access.runId };
    await next();
    return;
  }
  await authenticate(ctx, next);
}
