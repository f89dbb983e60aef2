import { conflict, unauthorized } from '@runtasks/shared/errors';
import { prepared, runPrepared, type Queryable } from '@runtasks/shared/db';
import { VERIFICATION_ACCESS_TOKEN, VERIFICATION_RESULT_ID } from '@runtasks/shared/outbound';
import { CALLBACK_TOKEN_PREFIX, DERIVED_TOKEN_HASH, isPlausibleToken } from '@runtasks/shared/security';
import type { Next } from 'koa';
import { hash, randomBytes } from 'node:crypto';
import { poolOf, type ApiContext, type ApiDeps } from '../context.ts';
import { PIPELINE_TOKEN_PREFIX, pipelinePrincipal, readPipelineToken } from '../ci/pipeline-tokens.ts';
import { unionOfTeams, type OrganizationRights, type Principal, type TeamRights } from './principal.ts';
import type { KnownToken } from './principal-memo.ts';

/** One of a user's memberships, with one of its teams (none: `team_id` null), as USER_COLUMNS gives them. */
interface MemberTeamRow {
  organization_id: string;
  team_id: string | null;
  is_owners: boolean | null;
  manage_run_tasks: boolean | null;
  manage_workspaces: boolean | null;
  manage_policy_overrides: boolean | null;
}

export interface TokenRow {
  id: string;
  kind: 'admin' | 'organization' | 'team' | 'user';
  organization_id: string | null;
  team_id: string | null;
  team_org_id: string | null;
  manage_run_tasks: boolean | null;
  manage_workspaces: boolean | null;
  manage_policy_overrides: boolean | null;
  is_owners: boolean | null;
  // However the pool's type parsers give timestamps back: as text or as dates.
  expires_at: string | Date | null;
  last_used_at: string | Date | null;
  user_id: string | null;
  user_is_admin: boolean | null;
  /** A user token's memberships and teams (json, parsed by the driver); null for other tokens. */
  member_teams: MemberTeamRow[] | string | null;
}

/**
 * The columns a user token's principal is made of, over `api_tokens t`: its user (joined as `u` by
 * USER_JOIN) and every accepted (`active`) membership of that user with each of its teams; an
 * invitation grants nothing until it is accepted. Null for other tokens.
 */
export const USER_COLUMNS = `t.user_id, u.is_admin as user_is_admin,
  case when t.user_id is null then null else (
    select coalesce(json_agg(json_build_object('organization_id', m.organization_id, 'team_id', x.team_id, 'is_owners', mt.is_owners,
             'manage_run_tasks', mt.manage_run_tasks, 'manage_workspaces', mt.manage_workspaces, 'manage_policy_overrides', mt.manage_policy_overrides)), '[]')
      from organization_memberships m left join team_memberships x on x.membership_id = m.id left join teams mt on mt.id = x.team_id
     where m.user_id = t.user_id and m.status = 'active') end as member_teams`;
export const USER_JOIN = 'left join users u on u.id = t.user_id';

/** A user's organizations, each with the union of the rights of their teams there (principal.ts). */
function memberOrganizations(rows: readonly MemberTeamRow[]): Map<string, OrganizationRights> {
  const teams = new Map<string, TeamRights[]>();
  for (const row of rows) {
    const list = teams.get(row.organization_id) ?? [];
    if (row.team_id !== null) {
      list.push({
        teamId: row.team_id,
        isOwners: row.is_owners === true,
        manageRunTasks: row.manage_run_tasks === true,
        manageWorkspaces: row.manage_workspaces === true,
        managePolicyOverrides: row.manage_policy_overrides === true,
      });
    }
    teams.set(row.organization_id, list);
  }
  return new Map([...teams].map(([organizationId, list]) => [organizationId, unionOfTeams(list)]));
}

const dateOrNull = (value: string | Date | null): Date | null => (value === null ? null : new Date(value));

const LAST_USED_RESOLUTION_MS = 60_000;

export function bearerToken(header: string | undefined): string | undefined {
  const match = /^Bearer ([^\s]+)$/i.exec(header ?? '');
  return match?.[1];
}

export function toPrincipal(row: TokenRow): Principal | undefined {
  if (row.kind === 'admin') return { kind: 'admin', tokenId: row.id };
  if (row.kind === 'user' && row.user_id) {
    // A site admin's own token acts as the site admin, and as that person.
    if (row.user_is_admin === true) return { kind: 'admin', tokenId: row.id, userId: row.user_id };
    const members: MemberTeamRow[] = typeof row.member_teams === 'string' ? JSON.parse(row.member_teams) : (row.member_teams ?? []);
    return { kind: 'user', tokenId: row.id, userId: row.user_id, organizations: memberOrganizations(members) };
  }
  if (row.kind === 'organization' && row.organization_id)
    return { kind: 'organization', tokenId: row.id, organizationId: row.organization_id };
  // The owners team's token holds owner rights, as the organization token does.
  if (row.kind === 'team' && row.team_org_id && row.is_owners === true)
    return { kind: 'organization', tokenId: row.id, organizationId: row.team_org_id };
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
          tm.manage_run_tasks, tm.manage_workspaces, tm.manage_policy_overrides, tm.is_owners, t.expires_at, t.last_used_at, ${USER_COLUMNS}
     from api_tokens t left join teams tm on tm.id = t.team_id ${USER_JOIN}
    where t.token_hash = $1 and t.revoked_at is null and (t.expires_at is null or t.expires_at > now())`,
);

/** A use recorded (bookkeeping: no principal changes, so no trigger fires). Accepting an invitation is the user's own act (users.service.ts). */
const TOKEN_USED = prepared('token-last-used', `update api_tokens set last_used_at = now() where id = $1`);

/** The token's principal from the database, or nothing when the token is unknown, revoked or expired. */
export async function lookUpToken(pool: Queryable, tokenHash: string): Promise<KnownToken | undefined> {
  const [row] = await runPrepared<TokenRow>(pool, TOKEN_PRINCIPAL, [tokenHash]);
  const principal = row && toPrincipal(row);
  return (
    row && principal && { principal, tokenId: row.id, expiresAt: dateOrNull(row.expires_at), lastUsedAt: dateOrNull(row.last_used_at) }
  );
}

/** Drawn once per process: what the principal cache's keys are salted with. */
const MEMO_SALT = randomBytes(32).toString('base64');

/**
 * What the principal cache files a token under: its SHA-256 salted with a random value of this
 * process's, so the cache holds no token, and no digest that a guess at an operator-chosen token (the
 * admin token) can be checked against without this process's memory. Not the keyed hash the database
 * stores, which costs six times as much (HMAC 1.2 µs against 0.2 here) and is made only on a miss.
 */
export const principalMemoKey = (token: string): string => hash('sha256', MEMO_SALT + token, 'base64');

/**
 * Before a token is looked up: 429 for an address past its failed authentications, and the same 401 for
 * a token the database refused a moment ago, neither asking the database. Returns the refusals' epoch,
 * for `refusedByDatabase`.
 */
export function beforeLookup(ctx: ApiContext, refusalKey: string): number {
  ctx.deps.ops?.authFailures?.check(ctx.ip);
  const cache = ctx.deps.ops?.principalCache;
  if (cache?.recallRefused(refusalKey)) {
    ctx.deps.ops?.authFailures?.recordFailure(ctx.ip);
    throw unauthorized();
  }
  return cache?.refusedEpoch ?? 0;
}

/**
 * Before a stored task access token's lookup (a result planned before tokens were derived): one of the
 * active tokens' hashes (PrincipalCache, which holds the open results' stored tokens too) is looked up
 * whatever its address sent before, and returns undefined (not counted against the address when refused);
 * any other goes through the failure limit and is refused without a lookup once proven unknown.
 */
async function beforeStoredTokenLookup(ctx: ApiContext, refusalKey: string, tokenHash: string): Promise<number | undefined> {
  const cache = ctx.deps.ops?.principalCache;
  if (cache?.isActive(tokenHash) === true) return undefined;
  const refusedEpoch = beforeLookup(ctx, refusalKey);
  if (await cache?.provenUnknown(tokenHash)) {
    refusedByDatabase(ctx, refusalKey, refusedEpoch);
    throw unauthorized();
  }
  return refusedEpoch;
}

/** The database refused the token: remembered for a moment, and counted against the client's address. */
export function refusedByDatabase(ctx: ApiContext, refusalKey: string, epoch: number): void {
  ctx.deps.ops?.principalCache?.rememberRefused(refusalKey, epoch);
  ctx.deps.ops?.authFailures?.recordFailure(ctx.ip);
}

/**
 * How long `authenticate` would refuse this request's token with the failure limit's 429, before any
 * lookup (0: it would not): its address is past its failed authentications, and the token is a pipeline's
 * or neither remembered nor one of the active tokens. The early refusal (http/early-refusal.ts) asks it
 * before the request reaches Koa, so the two cannot disagree.
 */
export function failureLimitRefusesForMs(deps: ApiDeps, address: string, token: string): number {
  const blockedMs = deps.ops?.authFailures?.blockedForMs(address) ?? 0;
  if (blockedMs === 0 || !isPlausibleToken(token)) return 0;
  if (token.startsWith(PIPELINE_TOKEN_PREFIX)) return blockedMs;
  const cache = deps.ops?.principalCache;
  if (cache?.recall(principalMemoKey(token)) || cache?.isActive(deps.secrets.hashToken(token)) === true) return 0;
  return blockedMs;
}

/**
 * Resolves the bearer token to a principal: from this process's cache when it has one (see
 * PrincipalCache for why that cannot outlive a revocation), else in one query. Every failure is the same
 * 401; a token refused a moment ago, one no active token matches (PrincipalCache.provenUnknown), or an
 * address past its failed authentications asks no query. The failure limit applies only to tokens that
 * are not active ones: a valid token is never refused for what its address sent besides.
 */
export async function authenticate(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (!token || !isPlausibleToken(token)) throw unauthorized();
  if (token.startsWith(PIPELINE_TOKEN_PREFIX)) {
    await authenticatePipeline(ctx, token);
    await next();
    return;
  }
  const cache = ctx.deps.ops?.principalCache;
  const memoKey = principalMemoKey(token);
  let known = cache?.recall(memoKey);
  if (!known) {
    const tokenHash = ctx.deps.secrets.hashToken(token);
    // One of the active tokens is looked up whatever its address sent before (never locked out by a flood).
    const active = cache?.isActive(tokenHash) === true;
    const refusedEpoch = active ? 0 : beforeLookup(ctx, memoKey);
    if (!active && (await cache?.provenUnknown(tokenHash))) {
      refusedByDatabase(ctx, memoKey, refusedEpoch);
      throw unauthorized();
    }
    const epoch = cache?.epoch ?? 0;
    known = await lookUpToken(await poolOf(ctx), tokenHash);
    if (!known) {
      if (!active) refusedByDatabase(ctx, memoKey, refusedEpoch);
      throw unauthorized();
    }
    cache?.remember(memoKey, known, epoch);
  }
  ctx.state.principal = known.principal;
  if (!known.lastUsedAt || Date.now() - known.lastUsedAt.getTime() > LAST_USED_RESOLUTION_MS) {
    // Bookkeeping only: never delay or fail the request for it. Recorded here too, so a remembered
    // token is written once a resolution, not on every request.
    known.lastUsedAt = new Date();
    const tokenId = known.tokenId;
    poolOf(ctx)
      .then((pool) => runPrepared(pool, TOKEN_USED, [tokenId]))
      .catch(() => undefined);
  }
  await next();
}

/** A pipeline's exchanged token (ci/pipeline-tokens.ts): not cached, so its rule's deletion ends it at once. */
async function authenticatePipeline(ctx: ApiContext, token: string): Promise<void> {
  const refusalKey = principalMemoKey(token);
  const refusedEpoch = beforeLookup(ctx, refusalKey);
  const grant = readPipelineToken(ctx.deps.secrets, token);
  const principal = grant && (await pipelinePrincipal(await poolOf(ctx), grant));
  if (!principal) {
    refusedByDatabase(ctx, refusalKey, refusedEpoch);
    throw unauthorized();
  }
  ctx.state.principal = principal;
}

/** This process changed tokens or teams: forget what it remembers now, before its own notification arrives. */
export function principalsChanged(ctx: ApiContext): void {
  ctx.deps.ops?.principalCache?.forgetAll();
}

/**
 * A task result's access token, valid while its result is open and before its hard deadline; it
 * is accepted only where a route asks for it (its callback and its run's plan JSON). A derived token
 * names its result (SecretBox.derivedSubject) and is that result's only where none is stored for it;
 * any other is looked up by its keyed hash (results planned before tokens were derived).
 */
export async function resolveTaskAccess(
  ctx: ApiContext,
  token: string,
): Promise<{ resultId: string; runId: string; status: string } | undefined> {
  const derivedFor = ctx.deps.secrets.derivedSubject(token, CALLBACK_TOKEN_PREFIX);
  const rows =
    derivedFor === undefined
      ? await runPrepared<{ id: string; run_id: string; status: string }>(await poolOf(ctx), TASK_ACCESS_BY_HASH, [
          ctx.deps.secrets.hashToken(token),
        ])
      : await runPrepared<{ id: string; run_id: string; status: string }>(await poolOf(ctx), TASK_ACCESS_DERIVED, [derivedFor]);
  const row = rows[0];
  return row && { resultId: row.id, runId: row.run_id, status: row.status };
}

const TASK_ACCESS_BY_HASH = prepared(
  'task-access-by-hash',
  `select tr.id, ts.run_id, tr.status from task_results tr join task_stages ts on ts.id = tr.task_stage_id
    where tr.callback_token_hash = $1 and (tr.hard_deadline is null or tr.hard_deadline > now())`,
);

const TASK_ACCESS_DERIVED = prepared(
  'task-access-derived',
  `select tr.id, ts.run_id, tr.status from task_results tr join task_stages ts on ts.id = tr.task_stage_id
    where tr.id = $1 and tr.callback_token_hash is null and (tr.hard_deadline is null or tr.hard_deadline > now())`,
);

const CALLBACK_ACCESS = prepared(
  'callback-access',
  `select id, status, (hard_deadline is not null and hard_deadline <= now()) as expired,
          (progress_deadline is not null and progress_deadline <= now()) as overdue
     from task_results where id = $1 and (callback_token_hash = $2 or (callback_token_hash is null and $2 = ''))`,
);

/** Why a callback may not change its result now (final or past its progress deadline: 409; past its hard deadline: 401), or nothing when it may. */
function callbackRefusal(status: string, expired: boolean, overdue: boolean): Error | undefined {
  if (status !== 'pending' && status !== 'running')
    return conflict(`The task result is already ${status}; it cannot change.`, 'transition not allowed');
  if (expired) return unauthorized();
  // Past its progress deadline it is errored, whether or not the sweeper has written that yet.
  if (overdue) return conflict('The task result is past its progress deadline; it ends as errored.', 'transition not allowed');
  return undefined;
}

/** The refusal of a callback as the database has it now: 401 when the token is not the result's. */
export async function currentCallbackRefusal(client: Queryable, resultId: string, tokenHash: string): Promise<Error | undefined> {
  const [row] = await runPrepared<{ status: string; expired: boolean; overdue: boolean }>(client, CALLBACK_ACCESS, [resultId, tokenHash]);
  return row ? callbackRefusal(row.status, row.expired, row.overdue) : unauthorized();
}

/** Errors about the request's input, which a refusal of the callback itself takes precedence over. */
const INPUT_ERRORS: ReadonlySet<number> = new Set([400, 413, 415, 422]);

/**
 * The verification request's callback URL with its `test-token`: some task servers call back during
 * the test (taking it for a run, or to try the callback); HCP's verification must not fail because of
 * that, so the answer is 200 whatever was sent, and nothing changes (no result has this id).
 */
function answerVerificationCallback(ctx: ApiContext): void {
  ctx.status = 200;
  ctx.type = 'application/vnd.api+json';
  ctx.body = {
    data: { id: VERIFICATION_RESULT_ID, type: 'task-results', attributes: { status: 'pending' } },
    meta: { verification: 'This is the run task verification callback: it is acknowledged and changes nothing.' },
  };
}

/**
 * `callback` routes: the result's own access token, checked before the body is read (a 401 never
 * depends on the body, and no unauthenticated body is parsed), and a refusal (final: 409, expired: 401)
 * comes before any complaint about the input. A token bound to this result (as the worker issues them,
 * `SecretBox.bindToken`) is checked without a lookup: the handler's statement checks the stored hash,
 * the status and the deadline, and an input error looks the result up before it is answered. Any
 * other token (issued before binding, or not ours) is looked up first, as it always was.
 */
export async function authenticateCallback(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  const resultId = ctx.params['task_result_id'] ?? '';
  if (token === VERIFICATION_ACCESS_TOKEN && resultId === VERIFICATION_RESULT_ID) {
    answerVerificationCallback(ctx);
    return;
  }
  if (!token || !isPlausibleToken(token)) throw unauthorized();
  // A token derived for this result is checked here, without a hash or a lookup; the statements then
  // compare DERIVED_TOKEN_HASH with the result's stored hash (none: it takes a derived token).
  const derived = ctx.deps.secrets.derivedSubject(token, CALLBACK_TOKEN_PREFIX) === resultId;
  const tokenHash = derived ? DERIVED_TOKEN_HASH : ctx.deps.secrets.hashToken(token);
  ctx.state.callbackAccess = { resultId, tokenHash };
  if (!derived && !ctx.deps.secrets.isBoundTo(token, CALLBACK_TOKEN_PREFIX, resultId)) {
    // Neither derived for this result nor bound to it (issued before binding, or not ours): looked up,
    // unless refused a moment ago or no stored token has its hash.
    const refusalKey = principalMemoKey(`callback:${resultId}:${token}`);
    const refusedEpoch = await beforeStoredTokenLookup(ctx, refusalKey, tokenHash);
    const refused = await currentCallbackRefusal(await poolOf(ctx), resultId, tokenHash);
    if ((refused as { status?: unknown } | undefined)?.status === 401 && refusedEpoch !== undefined)
      refusedByDatabase(ctx, refusalKey, refusedEpoch);
    if (refused) throw refused;
    await next();
    return;
  }
  try {
    await next();
  } catch (error) {
    if (!INPUT_ERRORS.has((error as { status?: unknown }).status as number)) throw error;
    throw (await currentCallbackRefusal(await poolOf(ctx), resultId, tokenHash)) ?? error;
  }
}

export async function authenticateTokenOrTask(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (token?.startsWith(CALLBACK_TOKEN_PREFIX)) {
    const refusalKey = principalMemoKey(`task:${token}`);
    // A derived token names its result and is proven by its MAC; any other must be a stored one.
    const derived = ctx.deps.secrets.derivedSubject(token, CALLBACK_TOKEN_PREFIX) !== undefined;
    const refusedEpoch = derived
      ? beforeLookup(ctx, refusalKey)
      : await beforeStoredTokenLookup(ctx, refusalKey, ctx.deps.secrets.hashToken(token));
    const access = await resolveTaskAccess(ctx, token);
    // Dead once its result is final (which it stays).
    if (!access || !['pending', 'running'].includes(access.status)) {
      if (refusedEpoch !== undefined) refusedByDatabase(ctx, refusalKey, refusedEpoch);
      throw unauthorized();
    }
    ctx.state.taskAccess = { resultId: access.resultId, runId: access.runId };
    await next();
    return;
  }
  await authenticate(ctx, next);
}
