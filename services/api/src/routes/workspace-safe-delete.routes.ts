import type { FilterQuery } from '@mikro-orm/core';
import { inLongTransaction, Workspace } from '@runtasks/shared/db';
import { holdingSql } from '@runtasks/shared/engine';
import { conflict } from '@runtasks/shared/errors';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { respond, type RouteDef } from './define.ts';
import { actionSchema } from './schemas.ts';

/**
 * Safe delete, as HCP Terraform has it: a workspace is deleted only while nothing locks it (a person's
 * lock or a run holding it). HCP also refuses while it manages resources; without state versions here
 * a workspace never does, so the lock is the only refusal.
 */

// go-tfe sends no body; like the run actions, an optional `comment` is read (and not stored) so that a
// body that is not an object is refused at a field, as everywhere else.
const noBodySchema = actionSchema;

const LOCKED_DETAIL = 'Workspace is currently locked. Workspace must be unlocked before it can be safely deleted';

const byId = (ctx: ApiContext): FilterQuery<Workspace> => ({ id: ctx.params['workspace_id'] ?? '' });
const byName = (ctx: ApiContext): FilterQuery<Workspace> => ({
  name: ctx.params['workspace_name'] ?? '',
  organization: { name: ctx.params['organization_name'] ?? '' },
});

function safeDeleteWith(where: (ctx: ApiContext) => FilterQuery<Workspace>) {
  return async (ctx: ApiContext): Promise<void> => {
    parseWith(noBodySchema, ctx.request.body);
    const workspace = await findWorkspace(ctx, 'manage', where(ctx));
    // The row is locked first, so a lock or a run taking the workspace meanwhile waits for the decision.
    const deleted = await inLongTransaction(ctx.state.em, ctx.deps.config.databaseStatementTimeoutMs, async (tx) => {
      const rows = await tx.execute<{ locked: boolean }[]>(
        `select (w.lock_kind is not null or exists (select 1 from runs h where h.workspace_id = w.id and ${holdingSql('h')})) as locked
           from workspaces w where w.id = ? for update`,
        [workspace.id],
      );
      if (rows[0]?.locked !== false) return false;
      await tx.nativeDelete(Workspace, { id: workspace.id });
      return true;
    });
    if (!deleted) throw conflict(LOCKED_DETAIL, 'workspace locked');
    respond(ctx, 204);
  };
}

export const workspaceSafeDeleteRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/actions/safe-delete',
    auth: 'token',
    summary: 'Delete a workspace unless it is locked',
    notes: '409 while a person or a run locks the workspace (a workspace here never manages resources).',
    requestSchema: noBodySchema,
    response: { status: 204, content: 'none' },
    handler: safeDeleteWith(byId),
  },
  {
    method: 'POST',
    path: '/organizations/:organization_name/workspaces/:workspace_name/actions/safe-delete',
    auth: 'token',
    summary: 'Delete a workspace by name unless it is locked',
    notes: '409 while a person or a run locks the workspace (a workspace here never manages resources).',
    requestSchema: noBodySchema,
    response: { status: 204, content: 'none' },
    handler: safeDeleteWith(byName),
  },
];
