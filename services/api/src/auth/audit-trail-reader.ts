import { forbidden, unauthorized } from '@runtasks/shared/errors';
import { isPlausibleToken } from '@runtasks/shared/security';
import type { Next } from 'koa';
import { poolOf, type ApiContext } from '../context.ts';
import { auditTrailTokenOrganization } from '../services/audit-trail.service.ts';
import { bearerToken, beforeLookup, lookUpToken, principalMemoKey, refusedByDatabase } from './authenticate.ts';

/**
 * `audit-trail` routes (HCP's `GET /organization/audit-trail`): the organization comes from the token,
 * the organization's audit trail token or an owner's token (the organization token, the owners team's).
 * Any other valid token (a team's, the site admin's, which names no organization) is a 403; an unknown
 * one the same 401 as everywhere, counted against the client's address. No other route accepts an
 * audit trail token: it is not an API token (authenticate never finds it).
 */
export async function authenticateAuditTrail(ctx: ApiContext, next: Next): Promise<void> {
  const token = bearerToken(ctx.get('authorization') || undefined);
  if (!token || !isPlausibleToken(token)) throw unauthorized();
  const refusalKey = principalMemoKey(`audit-trail:${token}`);
  const refusedEpoch = beforeLookup(ctx, refusalKey);
  const pool = await poolOf(ctx);
  const tokenHash = ctx.deps.secrets.hashToken(token);
  const organizationId = await auditTrailTokenOrganization(pool, tokenHash);
  if (organizationId) {
    ctx.state.auditTrailOrganizationId = organizationId;
    await next();
    return;
  }
  const known = await lookUpToken(pool, tokenHash);
  if (!known) {
    refusedByDatabase(ctx, refusalKey, refusedEpoch);
    throw unauthorized();
  }
  if (known.principal.kind !== 'organization')
    throw forbidden("The audit trail is read with the organization's audit trail token or an owner's token (the organization token).");
  ctx.state.principal = known.principal;
  ctx.state.auditTrailOrganizationId = known.principal.organizationId;
  await next();
}
