import type { FilterQuery } from '@mikro-orm/core';
import { forbidden, notFound } from '@runtasks/shared/errors';
import { Workspace } from '@runtasks/shared/db';
import { isRunsNeed, NEED_PERMISSION, workspaceScope, type RunsNeed, type WorkspaceNeed } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

async function findScopedWorkspace(ctx: ApiContext, need: WorkspaceNeed, where: FilterQuery<Workspace>): Promise<Workspace | null> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) return null;
  return ctx.state.em.findOne(Workspace, { $and: [scope, where] } as FilterQuery<Workspace>, { populate: ['organization'] });
}

/**
 * Finds a workspace by id (or by organization and name) inside the caller's scope for `need`. A caller
 * who reads the workspace but lacks the runs permission `need` asks for is told which it takes (403);
 * one who may not read it gets the 404 of a workspace that does not exist.
 */
export async function findWorkspace(
  ctx: ApiContext,
  need: WorkspaceNeed,
  where: FilterQuery<Workspace>,
  action = 'do this',
): Promise<Workspace> {
  const workspace = await findScopedWorkspace(ctx, need, where);
  if (workspace) return workspace;
  if (!isRunsNeed(need)) throw notFound();
  return missingRunsPermission(ctx, need, where, action);
}

/** The 403 for a caller who reads the workspace `where` names but lacks `need`; the 404 for one who may not read it. */
export async function missingRunsPermission(
  ctx: ApiContext,
  need: RunsNeed,
  where: FilterQuery<Workspace>,
  action: string,
): Promise<never> {
  if (!(await findScopedWorkspace(ctx, 'read', where))) throw notFound();
  throw forbidden(`This token may read the workspace but may not ${action}: that takes ${NEED_PERMISSION[need]}.`);
}
