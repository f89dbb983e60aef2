import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { ConfigurationVersion } from '@runtasks/shared/db';
import { workspaceScope, type WorkspaceNeed } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/** The configuration version of the path, inside the caller's scope for `need`: missing and forbidden are the same 404. */
export async function findVersion(ctx: ApiContext, need: WorkspaceNeed = 'runs:read'): Promise<ConfigurationVersion> {
  const scope = workspaceScope(ctx.state.principal, need);
  if (!scope) throw notFound();
  const where = { id: ctx.params['configuration_version_id'] ?? '', workspace: scope } as FilterQuery<ConfigurationVersion>;
  const version = await ctx.state.em.findOne(ConfigurationVersion, where);
  if (!version) throw notFound();
  return version;
}
