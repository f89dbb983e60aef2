import { prepared, runPrepared, type Queryable } from '@runtasks/shared/db';
import { safeEqualHex, type SecretBox } from '@runtasks/shared/security';
import type { Principal } from '../auth/principal.ts';

/**
 * The short-lived tokens a pipeline gets for its CI identity token (docs/sso.md). Nothing is stored:
 * a token carries its trust rule, its workspace and its expiry, with a MAC under the service's secret
 * key, and is good while it has not expired and its rule still trusts that workspace (one query per
 * request, so deleting the rule or the workspace ends it at once). Exchanging the same identity token
 * again gives another such token, which is harmless.
 */
export const PIPELINE_TOKEN_PREFIX = 'rtci_';
const MAC_HEX = 32;

const macOf = (secrets: SecretBox, payload: string): string => secrets.hashToken(`pipeline-token\u0000${payload}`).slice(0, MAC_HEX);

export interface PipelineGrant {
  ruleId: string;
  workspaceId: string;
  expiresAt: Date;
}

export function issuePipelineToken(secrets: SecretBox, grant: PipelineGrant): string {
  const payload = Buffer.from(`${grant.ruleId}.${grant.workspaceId}.${Math.floor(grant.expiresAt.getTime() / 1000)}`).toString('base64url');
  return `${PIPELINE_TOKEN_PREFIX}${payload}${macOf(secrets, payload)}`;
}

/** The grant a token carries, when it was issued here and has not expired. */
export function readPipelineToken(secrets: SecretBox, token: string, now = Date.now()): PipelineGrant | undefined {
  if (!token.startsWith(PIPELINE_TOKEN_PREFIX) || token.length <= PIPELINE_TOKEN_PREFIX.length + MAC_HEX) return undefined;
  const payload = token.slice(PIPELINE_TOKEN_PREFIX.length, -MAC_HEX);
  if (!safeEqualHex(token.slice(-MAC_HEX), macOf(secrets, payload))) return undefined;
  const [ruleId, workspaceId, expiry] = Buffer.from(payload, 'base64url').toString('utf8').split('.');
  const expiresAt = new Date(Number(expiry) * 1000);
  if (!ruleId || !workspaceId || !(expiresAt.getTime() > now)) return undefined;
  return { ruleId, workspaceId, expiresAt };
}

const PIPELINE_PRINCIPAL = prepared(
  'pipeline-principal',
  `select w.organization_id from ci_trust_rules r join workspaces w on w.id = r.workspace_id where r.id = $1 and r.workspace_id = $2`,
);

/** The pipeline's principal, while its rule still trusts its workspace. */
export async function pipelinePrincipal(pool: Queryable, grant: PipelineGrant): Promise<Principal | undefined> {
  const [row] = await runPrepared<{ organization_id: string }>(pool, PIPELINE_PRINCIPAL, [grant.ruleId, grant.workspaceId]);
  return row && { kind: 'pipeline', tokenId: grant.ruleId, organizationId: row.organization_id, workspaceId: grant.workspaceId };
}
