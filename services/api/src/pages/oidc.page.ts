import { recordAuditRefusal } from '@runtasks/shared/audit';
import { Organization } from '@runtasks/shared/db';
import type { Principal } from '../auth/principal.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { audit, auditTeamMembership } from '../services/audit.service.ts';
import { signInWithSso, SsoSignInRefused } from '../services/sso-sign-in.service.ts';
import { pageError } from './errors.ts';
import { relyingPartyOf } from './oidc/relying-parties.ts';
import { ProviderUnavailable, SignInRefused } from './oidc/relying-party.ts';
import { savePendingSignIn, takePendingSignIn } from './oidc/sign-in-state.ts';
import { ssoTokenId, startSession } from './session.ts';
import { nextOf } from './sign-in.page.ts';

/**
 * Single sign-on to the run pages (docs/sso.md, "People signing in to the run pages"): the browser is
 * sent to the identity provider and comes back to the callback. The protocol is in oidc/, what the
 * identity becomes in services/sso-sign-in.service.ts; here only the two legs' requests and answers.
 */
export { SSO_CALLBACK_PATH, SSO_PATH } from './layout.ts';

function relyingParty(ctx: ApiContext) {
  const party = relyingPartyOf(ctx.deps.config);
  if (!party) throw pageError(404, 'Single sign-on is not configured here.');
  return party;
}

/** The first leg: a new state, nonce and PKCE verifier kept for this browser, and on to the provider. */
export async function startSso(ctx: ApiContext): Promise<void> {
  const party = relyingParty(ctx);
  const next = nextOf(typeof ctx.query['next'] === 'string' ? ctx.query['next'] : undefined);
  let begun: Awaited<ReturnType<typeof party.begin>>;
  try {
    begun = await party.begin();
  } catch (error) {
    throw unavailable(ctx, error);
  }
  await savePendingSignIn(ctx, begun.pending, next);
  ctx.status = 303;
  ctx.redirect(begun.url.href);
}

function unavailable(ctx: ApiContext, error: unknown): Error {
  if (!(error instanceof ProviderUnavailable)) return error instanceof Error ? error : new Error(String(error));
  ctx.deps.logger.warn({ requestId: ctx.state.requestId, err: error.cause }, 'identity provider unavailable');
  return pageError(502, 'The identity provider cannot be reached just now. Try again shortly.');
}

/**
 * A refused sign-in: logged, and recorded in the audit trail of the organization the browser was
 * going to (its `next` page), and of the user it was about where that is known. Nothing else changes.
 */
async function refuse(ctx: ApiContext, status: number, reason: string, next: string | null, userId: string | null): Promise<never> {
  ctx.deps.logger.warn({ requestId: ctx.state.requestId, reason }, 'single sign-on refused');
  const organizationName = next?.split('/')[2];
  const organizationIds = new Set<string>();
  if (organizationName) {
    const organization = await ctx.state.em.findOne(Organization, { name: organizationName }, { fields: ['id'] });
    if (organization) organizationIds.add(organization.id);
  }
  if (userId) {
    const rows = await ctx.state.em.execute<{ organization_id: string }[]>(
      `select organization_id from organization_memberships where user_id = ?`,
      [userId],
    );
    for (const row of rows) organizationIds.add(row.organization_id);
  }
  const pool = await poolOf(ctx);
  for (const organizationId of organizationIds) {
    await recordAuditRefusal(pool, {
      organizationId,
      resourceType: 'session',
      resourceId: 'oidc',
      reason,
      claimedBy: userId,
      requestId: ctx.state.requestId,
      clientAddress: ctx.ip,
    });
  }
  throw pageError(status, reason);
}

/**
 * The return from the provider: only in the browser that left (its cookie), once, with the state it
 * left with; openid-client verifies the rest (PKCE, the ID token's issuer, audience and nonce). Then the
 * person's user and teams (signInWithSso), a session for them, and each sign-in and team change in the
 * organizations' audit trails.
 */
export async function finishSso(ctx: ApiContext): Promise<void> {
  const party = relyingParty(ctx);
  const taken = await takePendingSignIn(ctx);
  if (!taken) return refuse(ctx, 400, 'This sign-in was not started in this browser, or it has expired. Start again.', null, null);
  let identity: Awaited<ReturnType<typeof party.finish>>;
  try {
    identity = await party.finish(ctx.querystring, taken.pending);
  } catch (error) {
    if (error instanceof SignInRefused) return refuse(ctx, 401, error.reason, taken.next, null);
    throw unavailable(ctx, error);
  }
  let result: Awaited<ReturnType<typeof signInWithSso>>;
  try {
    result = await signInWithSso(ctx.state.em, identity, party.settings.teamsClaim);
  } catch (error) {
    if (error instanceof SsoSignInRefused) return refuse(ctx, 403, error.reason, taken.next, error.userId);
    throw error;
  }
  if (!(await startSession(ctx, { kind: 'user', userId: result.user.id })))
    throw pageError(409, 'Your user was removed while you signed in. Start again.');
  // The person acts in their own sign-in: the audit trail names them for it and for the team changes it made.
  const principal: Principal = { kind: 'user', tokenId: ssoTokenId(result.user.id), userId: result.user.id, organizations: new Map() };
  ctx.state.principal = principal;
  for (const change of result.teamChanges) await auditTeamMembership(ctx, { ...change, userId: result.user.id });
  for (const organizationId of result.organizationIds)
    await audit(ctx, organizationId, { type: 'session', id: 'oidc' }, 'sign_in', { method: 'oidc', user: result.user.id, how: result.how });
  ctx.status = 303;
  ctx.redirect(taken.next ?? '/app');
}
