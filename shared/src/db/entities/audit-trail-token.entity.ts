import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from './organization.entity.ts';

/**
 * An organization's audit trail token (HCP's `?token=audit-trails`): one per organization, reads the
 * audit trail and nothing else. Apart from api_tokens, so no other authentication finds it. Only a
 * keyed hash of the token is stored, as for API tokens.
 */
const AuditTrailTokenSchema = defineEntity({
  name: 'AuditTrailToken',
  tableName: 'audit_trail_tokens',
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade').unique(),
    tokenHash: p.string().length(64).unique(),
    description: p.text().nullable(),
    createdBy: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime().nullable(),
    lastUsedAt: p.datetime().nullable(),
  },
});

export class AuditTrailToken extends AuditTrailTokenSchema.class {}
AuditTrailTokenSchema.setClass(AuditTrailToken);
