import type { FilterQuery } from '@mikro-orm/core';
import { Workspace } from '@runtasks/shared/db';
import { workspaceScope, type WorkspaceNeed } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/**
 * Whether the signed-in principal has `need` on a workspace, by the API's own scope rules (the
 * filter every API lookup uses), so a page offers exactly what the API would allow.
 */
export async function mayOnWorkspace(ctx: ApiContext, need: WorkspaceNeed, workspaceId: string): Promise<boolean> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) return false;
  return (await ctx.state.em.count(Workspace, { $and: [scope, { id: workspaceId }] } as FilterQuery<Workspace>)) > 0;
}

/** Path segments of a page's URL: names and ids as they are, percent-encoded. */
export const pagePath = (...segments: string[]): string => `/app/${segments.map(encodeURIComponent).join('/')}`;
