import type { FilterQuery } from '@mikro-orm/core';
import { CiTrustRule, prepared, runPrepared, type Queryable, type Workspace } from '@runtasks/shared/db';
import { claimsMatch, newId } from '@runtasks/shared/domain';
import { ApiError, forbidden, invalidAttribute, notFound } from '@runtasks/shared/errors';
import { workspaceScope } from '../auth/scopes.ts';
import { issuePipelineToken } from '../ci/pipeline-tokens.ts';
import type { VerifiedIdentity } from '../ci/identity-verifier.ts';
import type { ApiContext } from '../context.ts';

/**
 * Trust rules for CI identity tokens, and the exchange of such a token for a pipeline token
 * (docs/sso.md). Managing a workspace's rules takes managing the workspace (owners and "manage
 * workspaces" teams); anyone else gets the 404 of a rule that does not exist.
 */

export const MAX_RULES_PER_WORKSPACE = 50;

export interface RuleAttributes {
  issuer?: string | undefined;
  audience?: string | undefined;
  claims?: Record<string, string> | undefined;
}

/** The issuer must be one the site admin allows (CI_TOKEN_ISSUERS). */
function checkIssuer(ctx: ApiContext, issuer: string): void {
  const allowed = ctx.deps.config.ciTokenIssuers;
  if (!allowed.includes(issuer))
    throw invalidAttribute(
      '/data/attributes/issuer',
      `must be one of the issuers this service trusts: ${allowed.join(', ') || 'none (CI_TOKEN_ISSUERS is empty)'}.`,
    );
}

export async function listRules(ctx: ApiContext, workspace: Workspace): Promise<CiTrustRule[]> {
  return ctx.state.em.find(CiTrustRule, { workspace: workspace.id }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function createRule(ctx: ApiContext, workspace: Workspace, attributes: RuleAttributes): Promise<CiTrustRule> {
  if (!attributes.issuer)
    throw new ApiError(422, 'missing attribute', '/data/attributes/issuer is required', { pointer: '/data/attributes/issuer' });
  if (!attributes.claims)
    throw new ApiError(422, 'missing attribute', '/data/attributes/claims is required', { pointer: '/data/attributes/claims' });
  checkIssuer(ctx, attributes.issuer);
  const count = await ctx.state.em.count(CiTrustRule, { workspace: workspace.id });
  if (count >= MAX_RULES_PER_WORKSPACE)
    throw new ApiError(422, 'invalid request', `A workspace may have at most ${MAX_RULES_PER_WORKSPACE} trust rules.`, {
      pointer: '/data',
    });
  const rule = ctx.state.em.create(CiTrustRule, {
    id: newId('ciTrustRule'),
    workspace,
    issuer: attributes.issuer,
    audience: attributes.audience ?? ctx.deps.config.publicBaseUrl,
    claims: attributes.claims,
    createdAt: new Date(),
  });
  await ctx.state.em.flush();
  return rule;
}

/** A rule of a workspace the caller manages, or the 404 of one that does not exist. */
export async function findRule(ctx: ApiContext, id: string): Promise<CiTrustRule> {
  const scope = workspaceScope(ctx.state.principal, 'manage');
  const rule =
    scope && (await ctx.state.em.findOne(CiTrustRule, { id, workspace: scope } as FilterQuery<CiTrustRule>, { populate: ['workspace'] }));
  if (!rule) throw notFound();
  return rule;
}

export async function updateRule(ctx: ApiContext, rule: CiTrustRule, attributes: RuleAttributes): Promise<CiTrustRule> {
  if (attributes.issuer !== undefined) {
    checkIssuer(ctx, attributes.issuer);
    rule.issuer = attributes.issuer;
  }
  if (attributes.audience !== undefined) rule.audience = attributes.audience;
  if (attributes.claims !== undefined) rule.claims = attributes.claims;
  await ctx.state.em.flush();
  return rule;
}

export async function deleteRule(ctx: ApiContext, rule: CiTrustRule): Promise<void> {
  await ctx.state.em.nativeDelete(CiTrustRule, { id: rule.id });
}

const RULES_OF_ISSUER = prepared(
  'ci-trust-rules-of-issuer',
  `select r.id, r.workspace_id, r.claims, w.name as workspace_name, o.name as organization_name
     from ci_trust_rules r join workspaces w on w.id = r.workspace_id join organizations o on o.id = w.organization_id
    where r.issuer = $1 and r.audience = any($2::text[]) and ($3::text is null or r.workspace_id = $3)
    order by r.created_at, r.id`,
);

interface RuleRow {
  id: string;
  workspace_id: string;
  claims: Record<string, string>;
  workspace_name: string;
  organization_name: string;
}

export interface PipelineTokenGrant {
  token: string;
  expiresAt: Date;
  ruleId: string;
  workspaceId: string;
  workspaceName: string;
  organizationName: string;
}

/**
 * A pipeline token for the workspace whose trust rule the verified identity matches. No rule: 403
 * (nothing changes). Rules of several workspaces: the caller must name one (`workspaceId`).
 */
export async function exchangeIdentity(
  ctx: ApiContext,
  pool: Queryable,
  identity: VerifiedIdentity,
  workspaceId: string | undefined,
): Promise<PipelineTokenGrant> {
  const rows = await runPrepared<RuleRow>(pool, RULES_OF_ISSUER, [identity.issuer, identity.audiences, workspaceId ?? null]);
  const matching = rows.filter((row) => claimsMatch(row.claims, identity.claims));
  const first = matching[0];
  if (!first)
    throw forbidden(
      `No trust rule${workspaceId ? ' of that workspace' : ''} accepts this identity token: its issuer, audience (${identity.audiences.join(', ')}) and claims match none.`,
    );
  const workspaces = [...new Set(matching.map((row) => row.workspace_id))];
  if (workspaces.length > 1)
    throw invalidAttribute(
      '/data/attributes/workspace-id',
      `The token is trusted by several workspaces (${workspaces.join(', ')}): name the one to drive.`,
    );
  const expiresAt = new Date(Date.now() + ctx.deps.config.ciTokenTtlSeconds * 1000);
  const token = issuePipelineToken(ctx.deps.secrets, { ruleId: first.id, workspaceId: first.workspace_id, expiresAt });
  return {
    token,
    expiresAt,
    ruleId: first.id,
    workspaceId: first.workspace_id,
    workspaceName: first.workspace_name,
    organizationName: first.organization_name,
  };
}

const ORGANIZATIONS_TRUSTING = prepared(
  'ci-trust-rule-organizations',
  `select distinct w.organization_id from ci_trust_rules r join workspaces w on w.id = r.workspace_id
    where r.issuer = $1 and ($2::text is null or r.workspace_id = $2) order by w.organization_id limit 20`,
);

/**
 * The organizations a refused identity token concerns, whose audit trails record the refusal: those with
 * a rule for its issuer (of the workspace it named, if it named one). Others never heard of the issuer:
 * a token of a public CI (any repository can get one) must not reach into their trails.
 */
export async function organizationsTrustingIssuer(pool: Queryable, issuer: string, workspaceId: string | undefined): Promise<string[]> {
  const rows = await runPrepared<{ organization_id: string }>(pool, ORGANIZATIONS_TRUSTING, [issuer, workspaceId ?? null]);
  return rows.map((row) => row.organization_id);
}
