import { type ApiError, conflict } from '@runtasks/shared/errors';
import { forceExecute, lockWorkspace, unlockWorkspace } from '@runtasks/shared/engine';
import { isForceCancelable, type LockDecision, type LockOwner } from '@runtasks/shared/domain';
import { z } from 'zod';
import type { Principal } from '../auth/principal.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { audit } from '../services/audit.service.ts';
import { parseWith } from '../http/body.ts';
import { single, type Resource } from '../http/jsonapi.ts';
import { respond, type RouteDef } from './define.ts';
import { actedBy } from '../auth/actor.ts';
import { findRun } from '../services/run-lookup.service.ts';
import { recordForceCancel } from '../services/run.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { actionSchema, safeText } from './schemas.ts';
import { workspaceDocuments } from './workspace-documents.ts';

/**
 * Workspace locking and the run queue's forcing actions, as HCP Terraform has them (rules in
 * shared/src/domain/run-queue.ts, statements in shared/src/engine/workspace-queue.ts).
 */

// go-tfe sends `{"reason": …}` (not a JSON:API document), or nothing.
const lockSchema = z.object({ reason: safeText(1000).optional() }).optional();
// Unlocks take no body (go-tfe sends none); an object's keys are ignored.
const noBodySchema = z.object({}).optional();

/**
 * Who a lock is taken for: a team token's team; the organization token (and the owners team's token,
 * which acts as it) for the organization's owners team; a person or the site admin as a user. A lock is taken off
 * by the one it was taken for, or by force-unlock.
 */
async function lockOwner(ctx: ApiContext, principal: Principal): Promise<LockOwner> {
  if (principal.kind === 'team') return { kind: 'teams', id: principal.teamId };
  if (principal.kind === 'organization') {
    const { rows } = await (
      await poolOf(ctx)
    ).query<{ id: string }>(`select id from teams where organization_id = $1 and is_owners`, [principal.organizationId]);
    // An organization without an owners team (see the owners-team migration) locks as its token, a user of its own.
    return rows[0] ? { kind: 'teams', id: rows[0].id } : { kind: 'users', id: principal.tokenId };
  }
  // A person locks as themself; the site admin (ADMIN_TOKEN) as its token.
  if (principal.kind === 'user') return { kind: 'users', id: principal.userId };
  // A pipeline locks as the service user of its trust rule.
  if (principal.kind === 'pipeline') return { kind: 'users', id: principal.tokenId };
  return { kind: 'users', id: principal.userId ?? principal.tokenId };
}

/** A refused lock or unlock: 409, with HCP's wording (go-tfe reads "is locked by Run/Team/User" from it). */
const refused = (decision: Extract<LockDecision, { ok: false }>, title: string): ApiError => conflict(decision.detail, title);

const byId = (ctx: ApiContext) => ({ id: ctx.params['workspace_id'] ?? '' });

async function lock(ctx: ApiContext): Promise<void> {
  const body = parseWith(lockSchema, ctx.request.body);
  const workspace = await findWorkspace(ctx, 'runs:apply', byId(ctx), 'lock it');
  const owner = await lockOwner(ctx, ctx.state.principal);
  const decision = await lockWorkspace(await poolOf(ctx), workspace.id, owner, body?.reason ?? '');
  if (!decision.ok) throw refused(decision, 'workspace already locked');
  await audit(ctx, workspace.organization.id, { type: 'workspace', id: workspace.id }, 'lock', { reason: body?.reason ?? null });
  respond(ctx, 200, single((await workspaceDocuments(ctx, [workspace])).data[0] as Resource));
}

function unlock(force: boolean) {
  return async (ctx: ApiContext): Promise<void> => {
    parseWith(noBodySchema, ctx.request.body);
    const workspace = await findWorkspace(ctx, force ? 'manage' : 'runs:apply', byId(ctx), 'unlock it');
    const caller = await lockOwner(ctx, ctx.state.principal);
    const decision = await unlockWorkspace(await poolOf(ctx), workspace.id, caller, force);
    if (!decision.ok) throw refused(decision, decision.lockedBy ? 'workspace locked' : 'workspace already unlocked');
    await audit(ctx, workspace.organization.id, { type: 'workspace', id: workspace.id }, force ? 'force_unlock' : 'unlock');
    respond(ctx, 200, single((await workspaceDocuments(ctx, [workspace])).data[0] as Resource));
  };
}

async function forceExecuteRun(ctx: ApiContext): Promise<void> {
  const body = parseWith(actionSchema, ctx.request.body);
  const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' }, 'force-execute it');
  const outcome = await forceExecute(await poolOf(ctx), run.id, actedBy(ctx.state.principal, body?.comment));
  if (!outcome.ok) throw conflict(outcome.detail, 'transition not allowed');
  respond(ctx, 202);
}

async function forceCancelRun(ctx: ApiContext): Promise<void> {
  const body = parseWith(actionSchema, ctx.request.body);
  const run = await findRun(ctx, 'runs:apply', { id: ctx.params['run_id'] ?? '' }, 'force-cancel it');
  // A cancel here ends the run in its own transaction: nothing is ever left for force-cancel to end.
  if (!isForceCancelable(run))
    throw conflict(
      `A run can be force-canceled only after a cancel that has not taken effect; a cancel ends a run at once here (this one is ${run.status}).`,
      'transition not allowed',
    );
  await recordForceCancel(ctx.state.em, run.id, actedBy(ctx.state.principal, body?.comment));
  respond(ctx, 202);
}

export const workspaceLockRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/actions/lock',
    auth: 'token',
    summary: 'Lock a workspace',
    notes: 'New runs wait `pending` while the workspace is locked. 409 where a person or a run holds it already.',
    requestSchema: lockSchema,
    response: { status: 200, content: 'jsonapi' },
    handler: lock,
  },
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/actions/unlock',
    auth: 'token',
    summary: 'Unlock a workspace',
    notes: 'Only the team or user that locked it; 409 where a run holds it, or it is not locked. The next waiting run starts.',
    requestSchema: noBodySchema,
    response: { status: 200, content: 'jsonapi' },
    handler: unlock(false),
  },
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/actions/force-unlock',
    auth: 'token',
    summary: 'Unlock a workspace locked by anyone',
    notes: 'Takes managing the workspace. 409 where a run holds it, or it is not locked.',
    requestSchema: noBodySchema,
    response: { status: 200, content: 'jsonapi' },
    handler: unlock(true),
  },
  {
    method: 'POST',
    path: '/runs/:run_id/actions/force-execute',
    auth: 'token',
    summary: 'Start a pending run now',
    notes:
      'Discards (or cancels) every run ahead of it in the workspace queue and starts it. Only for a run waiting in the queue. A `comment` is kept on the run.',
    requestSchema: actionSchema,
    response: { status: 202, content: 'none' },
    handler: forceExecuteRun,
  },
  {
    method: 'POST',
    path: '/runs/:run_id/actions/force-cancel',
    auth: 'token',
    summary: 'Force-cancel a run',
    notes: 'Only after a cancel that has not taken effect (`is-force-cancelable`); a cancel here ends a run at once, so this answers 409.',
    requestSchema: actionSchema,
    response: { status: 202, content: 'none' },
    handler: forceCancelRun,
  },
];
