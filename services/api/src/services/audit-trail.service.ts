import type { EntityManager } from '@mikro-orm/postgresql';
import { AuditTrailToken, type Queryable } from '@runtasks/shared/db';
import { newId } from '@runtasks/shared/domain';
import { API_TOKEN_PREFIX, generateToken, type SecretBox } from '@runtasks/shared/security';
import type { Page } from '../http/pagination.ts';

/** An audit trail event as HCP's audit trail shows it (not JSON:API). */
export interface AuditTrailEvent {
  id: string;
  version: string;
  type: 'Resource';
  timestamp: string;
  auth: { accessor_id: string | null; description: string | null; type: string; impersonator_id: null; organization_id: string };
  request: { id: string | null; client_address: string | null };
  resource: { id: string; type: string; action: string; meta: Record<string, unknown> | null };
}

interface AuditEventRow {
  id: string;
  organization_id: string;
  timestamp: Date | string;
  actor_id: string | null;
  actor_description: string | null;
  auth_type: string;
  request_id: string | null;
  resource_type: string;
  resource_id: string;
  action: string;
  meta: Record<string, unknown> | null;
  client_address: string | null;
  total: string;
}

const toEvent = (row: AuditEventRow): AuditTrailEvent => ({
  id: row.id,
  version: '0',
  type: 'Resource',
  timestamp: new Date(row.timestamp).toISOString(),
  auth: {
    accessor_id: row.actor_id,
    description: row.actor_description,
    type: row.auth_type,
    impersonator_id: null,
    organization_id: row.organization_id,
  },
  request: { id: row.request_id, client_address: row.client_address },
  resource: { id: row.resource_id, type: row.resource_type, action: row.action, meta: row.meta },
});

/**
 * One page of an organization's audit trail after `since` (or all), oldest first, with the count of all:
 * one statement. `since` counts in whole seconds, as HCP's (go-tfe sends it to the second, cut, not
 * rounded): the events of a later second than its.
 */
export async function auditTrailPage(
  db: Queryable,
  organizationId: string,
  since: Date | null,
  page: Page,
): Promise<{ events: AuditTrailEvent[]; total: number }> {
  const { rows } = await db.query<AuditEventRow>(
    `select e.*, count(*) over () as total from audit_events e
      where e.organization_id = $1 and ($2::timestamptz is null or e.timestamp >= date_trunc('second', $2::timestamptz) + interval '1 second')
      order by e.timestamp, e.id limit $3 offset $4`,
    [organizationId, since, page.size, page.offset],
  );
  if (rows.length > 0 || page.offset === 0) return { events: rows.map(toEvent), total: Number(rows[0]?.total ?? 0) };
  // Past the last page: the count alone.
  const { rows: counted } = await db.query<{ total: string }>(
    `select count(*) as total from audit_events where organization_id = $1 and ($2::timestamptz is null or timestamp >= date_trunc('second', $2::timestamptz) + interval '1 second')`,
    [organizationId, since],
  );
  return { events: [], total: Number(counted[0]?.total ?? 0) };
}

/** The organization an audit trail token reads, or null for any other token (unknown or expired); marks it used. */
export async function auditTrailTokenOrganization(db: Queryable, tokenHash: string): Promise<string | null> {
  const { rows } = await db.query<{ organization_id: string }>(
    `update audit_trail_tokens set last_used_at = now()
      where token_hash = $1 and (expires_at is null or expires_at > now()) returning organization_id`,
    [tokenHash],
  );
  return rows[0]?.organization_id ?? null;
}

/** Issues the organization's audit trail token, replacing the one it had, in one transaction; the secret is returned once. */
export async function issueAuditTrailToken(
  em: EntityManager,
  secrets: SecretBox,
  options: { organizationId: string; description: string | null; expiresAt: Date | null; createdBy: string },
): Promise<{ token: AuditTrailToken; secret: string; replaced: string | null }> {
  const secret = generateToken(API_TOKEN_PREFIX);
  return em.transactional(async (tx) => {
    const previous = await tx.findOne(AuditTrailToken, { organization: options.organizationId });
    if (previous) {
      await tx.nativeDelete(AuditTrailToken, { id: previous.id });
    }
    const token = tx.create(AuditTrailToken, {
      id: newId('token'),
      organization: options.organizationId,
      tokenHash: secrets.hashToken(secret),
      description: options.description,
      createdBy: options.createdBy,
      expiresAt: options.expiresAt,
    });
    await tx.flush();
    return { token, secret, replaced: previous?.id ?? null };
  });
}

export const findAuditTrailToken = (em: EntityManager, organizationId: string): Promise<AuditTrailToken | null> =>
  em.findOne(AuditTrailToken, { organization: organizationId });

/** Deletes the organization's audit trail token: its id, or null when it had none. */
export async function revokeAuditTrailToken(em: EntityManager, organizationId: string): Promise<string | null> {
  const token = await findAuditTrailToken(em, organizationId);
  if (!token) return null;
  await em.nativeDelete(AuditTrailToken, { id: token.id });
  return token.id;
}
