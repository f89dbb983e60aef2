import type { CiTrustRule } from '@runtasks/shared/db';
import { claimPatternProblems } from '@runtasks/shared/domain';
import { ApiError } from '@runtasks/shared/errors';
import { z } from 'zod';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single, timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import type { VerifiedIdentity } from '../ci/identity-verifier.ts';
import { identityVerifierOf } from '../ci/verifiers.ts';
import { auditAnonymousRefusal } from '../services/audit.service.ts';
import {
  createRule,
  deleteRule,
  exchangeIdentity,
  findRule,
  listRules,
  organizationsTrustingIssuer,
  updateRule,
} from '../services/ci-trust-rule.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { respond, type RouteDef } from './define.ts';
import { noRelationships, resourceDocument, safeText } from './schemas.ts';

/**
 * Trust rules for CI identity tokens, and the exchange (docs/sso.md, rules in
 * services/ci-trust-rule.service.ts). Managing rules takes managing the workspace.
 */

const claimsSchema = z.record(z.string(), z.unknown(), 'must be an object of claim names to values or globs').superRefine((claims, ctx) => {
  for (const problem of claimPatternProblems(claims))
    ctx.addIssue({ code: 'custom', message: problem.detail, path: problem.key === null ? [] : [problem.key] });
});

const ruleAttributes = z.object({
  issuer: safeText(255).min(1).optional(),
  audience: safeText(255).min(1).optional(),
  claims: claimsSchema.transform((claims) => claims as Record<string, string>).optional(),
});
const ruleDocument = resourceDocument('ci-trust-rules', ruleAttributes, noRelationships);

const COMPACT_JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

const exchangeDocument = resourceDocument(
  'ci-token-exchanges',
  z.object({
    // A compact JWT's shape (three base64url parts): anything else is a wrong body (422 at the field), not a
    // credential to verify; one of that shape that does not verify is the 401.
    'id-token': z
      .string('must be the CI identity token (a JWT)')
      .max(16_384, 'must be at most 16384 characters')
      .regex(COMPACT_JWT, 'must be the CI identity token (a JWT: three base64url parts separated by dots)'),
    'workspace-id': safeText(64).min(1).optional(),
  }),
  noRelationships,
);

function serializeRule(rule: CiTrustRule): Resource {
  return {
    id: rule.id,
    type: 'ci-trust-rules',
    attributes: { issuer: rule.issuer, audience: rule.audience, claims: rule.claims, 'created-at': timestamp(rule.createdAt) },
    relationships: { workspace: toOne('workspaces', rule.workspace.id) },
  };
}

const workspaceOf = (ctx: ApiContext) => findWorkspace(ctx, 'manage', { id: ctx.params['workspace_id'] ?? '' });

async function list(ctx: ApiContext): Promise<void> {
  const rules = await listRules(ctx, await workspaceOf(ctx));
  respond(ctx, 200, { data: rules.map(serializeRule) });
}

async function create(ctx: ApiContext): Promise<void> {
  const workspace = await workspaceOf(ctx);
  const { data } = parseWith(ruleDocument, ctx.request.body);
  respond(ctx, 201, single(serializeRule(await createRule(ctx, workspace, data.attributes))));
}

async function show(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(serializeRule(await findRule(ctx, ctx.params['rule_id'] ?? ''))));
}

async function update(ctx: ApiContext): Promise<void> {
  const rule = await findRule(ctx, ctx.params['rule_id'] ?? '');
  const { data } = parseWith(ruleDocument, ctx.request.body);
  respond(ctx, 200, single(serializeRule(await updateRule(ctx, rule, data.attributes))));
}

async function destroy(ctx: ApiContext): Promise<void> {
  await deleteRule(ctx, await findRule(ctx, ctx.params['rule_id'] ?? ''));
  respond(ctx, 204);
}

/**
 * A verified identity token that no trust rule accepts, in the trails of the organizations that trust
 * its issuer: who it claimed to be (its `sub`, no secret) and why, never the token.
 */
async function auditNoRule(ctx: ApiContext, identity: VerifiedIdentity, workspaceId: string | undefined, error: unknown): Promise<void> {
  const organizations = await organizationsTrustingIssuer(await poolOf(ctx), identity.issuer, workspaceId);
  const subject = identity.claims.sub;
  await auditAnonymousRefusal(ctx, organizations, {
    resourceType: 'ci_token_exchange',
    resourceId: workspaceId ?? identity.issuer,
    reason: error instanceof ApiError ? (error.detail ?? error.title) : 'refused',
    claimedBy: typeof subject === 'string' ? subject.slice(0, 255) : null,
  });
}

async function exchange(ctx: ApiContext): Promise<void> {
  const { data } = parseWith(exchangeDocument, ctx.request.body);
  ctx.deps.ops?.authFailures?.check(ctx.ip);
  let grant;
  try {
    const identity = await identityVerifierOf(ctx.deps).verify(data.attributes['id-token']);
    grant = await exchangeIdentity(ctx, await poolOf(ctx), identity, data.attributes['workspace-id']).catch(async (error: unknown) => {
      if ((error as { status?: unknown }).status === 403) await auditNoRule(ctx, identity, data.attributes['workspace-id'], error);
      throw error;
    });
  } catch (error) {
    const status = (error as { status?: unknown }).status;
    if (status === 401 || status === 403) ctx.deps.ops?.authFailures?.recordFailure(ctx.ip);
    throw error;
  }
  respond(
    ctx,
    201,
    single({
      id: grant.ruleId,
      type: 'ci-tokens',
      attributes: {
        token: grant.token,
        'expires-at': timestamp(grant.expiresAt),
        'workspace-id': grant.workspaceId,
        'workspace-name': grant.workspaceName,
        'organization-name': grant.organizationName,
      },
      relationships: { workspace: toOne('workspaces', grant.workspaceId), 'ci-trust-rule': toOne('ci-trust-rules', grant.ruleId) },
    }),
  );
}

const MANAGE = 'Takes managing the workspace (owners, "manage workspaces" teams); anyone else gets a 404.';

export const ciTrustRuleRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/ci-trust-rules',
    auth: 'token',
    summary: "List a workspace's trust rules for CI identity tokens",
    notes: MANAGE,
    handler: list,
  },
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/ci-trust-rules',
    auth: 'token',
    summary: 'Trust CI identity tokens to drive this workspace',
    notes: `${MANAGE} \`issuer\` must be one of CI_TOKEN_ISSUERS; \`audience\` defaults to the service's public URL; \`claims\` maps claim names (repository, ref, environment, project_path…) to exact values or globs (\`*\` within a path segment, \`**\` across).`,
    requestSchema: ruleDocument,
    handler: create,
  },
  { method: 'GET', path: '/ci-trust-rules/:rule_id', auth: 'token', summary: 'Show a trust rule', notes: MANAGE, handler: show },
  {
    method: 'PATCH',
    path: '/ci-trust-rules/:rule_id',
    auth: 'token',
    summary: 'Change a trust rule',
    notes: `${MANAGE} Tokens already exchanged under it keep working until they expire when the rule still exists.`,
    requestSchema: ruleDocument,
    handler: update,
  },
  {
    method: 'DELETE',
    path: '/ci-trust-rules/:rule_id',
    auth: 'token',
    summary: 'Delete a trust rule',
    notes: `${MANAGE} Tokens exchanged under it stop working at once.`,
    handler: destroy,
  },
  {
    method: 'POST',
    path: '/ci-token-exchanges',
    auth: 'public',
    summary: "Exchange a CI's identity token for a short-lived pipeline token",
    notes:
      "The token is verified against its issuer's keys; a workspace's trust rule must accept its issuer, audience and claims (else 401 for a token that does not verify, 403 for one no rule trusts). The answer's token drives that workspace's runs (create, report plans and applies, read) for CI_TOKEN_TTL_SECONDS. `workspace-id` is needed only when rules of several workspaces accept the token.",
    requestSchema: exchangeDocument,
    handler: exchange,
  },
];
