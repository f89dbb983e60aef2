import { recordAuditEvent, recordAuditRefusal } from '@runtasks/shared/audit';
import { ApiError } from '@runtasks/shared/errors';
import type { Queryable } from '@runtasks/shared/db';
import { actorId, actorUsername, parseActor } from '../auth/actor.ts';
import type { Principal } from '../auth/principal.ts';
import { poolOf, type ApiContext } from '../context.ts';

/** The resource an audited action was on, in HCP's snake_case types (`task`, `workspace_task`, `authentication_token`). */
export interface AuditedResource {
  type: string;
  id: string;
}

/** The principal as the audit trail names it without a lookup: its user id, and a service user's username (a person's: namedAuditActor). */
export function auditActor(principal: Principal): { actorId: string; actorDescription: string } {
  const id = actorId(principal);
  const actor = parseActor(id);
  // A person's username takes a lookup (namedAuditActor); their id stands in here.
  return { actorId: id, actorDescription: actor && actor.kind !== 'user' ? actorUsername(actor) : id };
}

/**
 * The principal as HCP's audit trail names a user: `accessor_id` the user id and `description` the
 * username, a person's as it is when they act (read here, one indexed lookup; the id where the user is
 * gone), a service user's derived from its id (auditActor).
 */
export async function namedAuditActor(db: Queryable, principal: Principal): Promise<{ actorId: string; actorDescription: string }> {
  const named = auditActor(principal);
  if (parseActor(named.actorId)?.kind !== 'user') return named;
  const { rows } = await db.query<{ username: string }>(`select username from users where id = $1`, [named.actorId]);
  return { actorId: named.actorId, actorDescription: rows[0]?.username ?? named.actorId };
}

/**
 * Records, in the organization's audit trail, that the request's caller did `action` to `resource`,
 * (or `principal`, where the request authenticated none: a sign-in), with the request's id and the
 * client's address. Called by a route once the action has taken effect;
 * `meta` (what changed, in the API's names) has its secrets dropped before it is stored.
 */
export async function audit(
  ctx: ApiContext,
  organizationId: string,
  resource: AuditedResource,
  action: string,
  meta?: Record<string, unknown> | null,
  principal: Principal = ctx.state.principal,
): Promise<void> {
  const pool = await poolOf(ctx);
  await recordAuditEvent(pool, {
    organizationId,
    ...(await namedAuditActor(pool, principal)),
    requestId: ctx.state.requestId,
    resourceType: resource.type,
    resourceId: resource.id,
    action,
    meta: meta ?? null,
    clientAddress: ctx.ip,
  });
}

/**
 * A change of a team's members (a user added to or removed from it), for the code that makes it:
 * recorded as `team_membership` `create` or `destroy`, naming the team and the user.
 */
export function auditTeamMembership(
  ctx: ApiContext,
  change: { organizationId: string; teamId: string; userId: string; added: boolean },
): Promise<void> {
  return audit(
    ctx,
    change.organizationId,
    { type: 'team_membership', id: `${change.teamId}:${change.userId}` },
    change.added ? 'create' : 'destroy',
    {
      team: change.teamId,
      user: change.userId,
    },
  );
}

/**
 * Runs `action` (a write the caller is allowed to attempt), and when it is refused for its input (a
 * 4xx ApiError other than 401/404, which say nothing about the input and would let anyone fill the
 * trail) records the refusal before passing it on: action `refuse` on the resource asked for, by the
 * caller, with the error's status, detail and pointer. Never the request's body: a value that was wrong
 * may be a secret sent in the wrong field. Nothing else is written: the refusal changed nothing.
 */
export async function auditingRefusals<T>(
  ctx: ApiContext,
  organizationId: string,
  resource: AuditedResource,
  action: () => Promise<T>,
): Promise<T> {
  try {
    return await action();
  } catch (error) {
    if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 401 && error.status !== 404) {
      await audit(ctx, organizationId, resource, 'refuse', {
        status: error.status,
        title: error.title,
        detail: error.detail ?? null,
        pointer: error.source?.pointer ?? error.source?.parameter ?? null,
      });
    }
    throw error;
  }
}

/**
 * A refused request that authenticated nobody (a CI identity token no trust rule accepts), in each of
 * these organizations' trails: action `refuse` by the service (`System`), naming whoever the
 * credential claimed to be where that is no secret, with the reason. Never the credential.
 */
export async function auditAnonymousRefusal(
  ctx: ApiContext,
  organizationIds: readonly string[],
  refusal: { resourceType: string; resourceId: string; reason: string; claimedBy: string | null },
): Promise<void> {
  const pool = await poolOf(ctx);
  for (const organizationId of organizationIds)
    await recordAuditRefusal(pool, { ...refusal, organizationId, requestId: ctx.state.requestId, clientAddress: ctx.ip });
}
