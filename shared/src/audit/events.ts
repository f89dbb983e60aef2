import { randomUUID } from 'node:crypto';
import type { Queryable } from '../db/prepared.ts';
import { redactSecrets } from './redact.ts';

/** How the actor was authenticated, in HCP's words: a token of its own (`Client`) or the service itself (`System`). */
export type AuditAuthType = 'Client' | 'Impersonated' | 'System';

/** One thing that happened in an organization, as its audit trail records it (HCP's audit trail event). */
export interface AuditEventInput {
  organizationId: string;
  /** Who acted: a user id (a token's owner's service user, later a person's), or null for the service itself. */
  actorId: string | null;
  /** The actor in words (its username). */
  actorDescription: string | null;
  authType?: AuditAuthType;
  /** The request it happened in, to match against the service's logs. */
  requestId?: string | null;
  /** The acted-on resource's type, snake_case as HCP's (`task`, `workspace_task`, `authentication_token`). */
  resourceType: string;
  resourceId: string;
  /** `create`, `update`, `destroy`, `override`, `sign_in`, `refuse`… */
  action: string;
  /** What changed, in the API's attribute names; secrets are dropped (redactSecrets) before it is stored. */
  meta?: Record<string, unknown> | null;
  /** The client's address as the service sees it (TRUST_PROXY decides whether a proxy's header counts). */
  clientAddress?: string | null;
}

/**
 * Records an event in the organization's audit trail, on the caller's client: inside the caller's
 * transaction where it has one, so the event commits with what it records. Its time is kept to the
 * millisecond, as it is shown, so `since` an event's shown time never returns that event.
 */
export async function recordAuditEvent(db: Queryable, event: AuditEventInput): Promise<string> {
  const id = randomUUID();
  const meta = event.meta ? JSON.stringify(redactSecrets(event.meta)) : null;
  await db.query(
    `insert into audit_events (id, organization_id, timestamp, actor_id, actor_description, auth_type, request_id,
                               resource_type, resource_id, action, meta, client_address)
     values ($1, $2, date_trunc('milliseconds', now()), $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11)`,
    [
      id,
      event.organizationId,
      event.actorId,
      event.actorDescription,
      event.authType ?? 'Client',
      event.requestId ?? null,
      event.resourceType,
      event.resourceId,
      event.action,
      meta,
      event.clientAddress ?? null,
    ],
  );
  return id;
}

/** A refused request worth auditing: a CI token that matched no trust rule, a wrong OIDC state. */
export interface AuditRefusal {
  organizationId: string;
  /** What was refused: the resource asked for (its type and id), e.g. `trust_rule` and the rule's or token's id. */
  resourceType: string;
  resourceId: string;
  /** Why, in words; never the credential itself. */
  reason: string;
  /** Whoever the credential claimed to be, where that is known and is no secret (a CI subject). */
  claimedBy?: string | null;
  requestId?: string | null;
  clientAddress?: string | null;
}

/** Records a refusal (action `refuse`) in the organization's audit trail, with the reason in its meta. */
export function recordAuditRefusal(db: Queryable, refusal: AuditRefusal): Promise<string> {
  return recordAuditEvent(db, {
    organizationId: refusal.organizationId,
    actorId: null,
    actorDescription: refusal.claimedBy ?? null,
    authType: 'System',
    requestId: refusal.requestId ?? null,
    resourceType: refusal.resourceType,
    resourceId: refusal.resourceId,
    action: 'refuse',
    meta: { reason: refusal.reason },
    clientAddress: refusal.clientAddress ?? null,
  });
}

/** Deletes the events older than the retention: returns how many went. */
export async function pruneAuditEvents(db: Queryable, retentionDays: number): Promise<number> {
  const result = await db.query(`delete from audit_events where timestamp < now() - make_interval(days => $1)`, [retentionDays]);
  return result.rowCount ?? 0;
}
