import { defineEntity, p } from '@mikro-orm/core';
import { Workspace } from './workspace.entity.ts';

/**
 * A workspace's trust in a CI's identity tokens (as PyPI's trusted publishing has it): a token from
 * `issuer`, for `audience`, whose claims match every pattern of `claims` (claim name to an exact value
 * or a glob), may be exchanged for a short-lived token that drives this workspace's runs. It goes with
 * its workspace.
 */
const CiTrustRuleSchema = defineEntity({
  name: 'CiTrustRule',
  tableName: 'ci_trust_rules',
  indexes: [{ name: 'ci_trust_rules_workspace_idx', properties: ['workspace'] }],
  properties: {
    id: p.string().length(32).primary(),
    workspace: () => p.manyToOne(Workspace).deleteRule('cascade'),
    issuer: p.string().length(255),
    audience: p.string().length(255),
    claims: p.json<Record<string, string>>(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class CiTrustRule extends CiTrustRuleSchema.class {}
CiTrustRuleSchema.setClass(CiTrustRule);
