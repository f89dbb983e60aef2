import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { Workspace } from '@runtasks/shared/db';
import { workspaceScope, type WorkspaceNeed } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/** Finds a workspace by id (or by organization and name) inside the caller's scope for `need`. */
export async function findWorkspace(ctx: ApiContext, need: WorkspaceNeed, where: FilterQuery<Workspace>): Promise<Workspace> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) throw notFound();
  const workspace = await ctx.state.em.findOne(Workspace, { $and: [scope, where] } as FilterQuery<Workspace>, {
    populate: ['organization'],
  });
  if (!workspace) throw notFound();
  return workspace;
}
