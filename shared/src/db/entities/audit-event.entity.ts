import { defineEntity, p } from '@mikro-orm/core';

/**
 * One event of an organization's audit trail (HCP's audit trail): written by shared/src/audit, read by
 * GET /organization/audit-trail, pruned past its retention. History: no foreign keys.
 */
const AuditEventSchema = defineEntity({
  name: 'AuditEvent',
  tableName: 'audit_events',
  indexes: [
    { name: 'audit_events_organization_idx', properties: ['organizationId', 'timestamp', 'id'] },
    { name: 'audit_events_timestamp_idx', properties: ['timestamp'] },
  ],
  properties: {
    id: p.uuid().primary(),
    organizationId: p.string().length(32),
    timestamp: p.datetime(),
    actorId: p.text().nullable(),
    actorDescription: p.text().nullable(),
    authType: p.text(),
    requestId: p.text().nullable(),
    resourceType: p.text(),
    resourceId: p.text(),
    action: p.text(),
    meta: p.json<Record<string, unknown>>().nullable(),
    clientAddress: p.text().nullable(),
  },
});

export class AuditEvent extends AuditEventSchema.class {}
AuditEventSchema.setClass(AuditEvent);
