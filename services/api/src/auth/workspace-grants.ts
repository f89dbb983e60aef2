import type { EntityManager } from '@mikro-orm/core';
import { TeamWorkspace } from '@runtasks/shared/db';
import type { WorkspaceGrant } from './permissions.ts';
import type { Principal } from './principal.ts';

/**
 * The calling team's access rows for these workspaces, by workspace id: one query for a whole page,
 * and none at all for callers whose rights do not depend on a row (the site admin, organization
 * tokens, "manage workspaces" teams).
 */
export async function workspaceGrants(
  em: EntityManager,
  principal: Principal,
  workspaceIds: readonly string[],
): Promise<Map<string, WorkspaceGrant>> {
  const grants = new Map<string, WorkspaceGrant>();
  if (principal.kind !== 'team' || principal.manageWorkspaces || workspaceIds.length === 0) return grants;
  const rows = await em.find(
    TeamWorkspace,
    { team: principal.teamId, workspace: { $in: [...workspaceIds] } },
    { fields: ['workspace', 'runs', 'runTasks'] },
  );
  for (const row of rows) grants.set(row.workspace.id, { runs: row.runs, runTasks: row.runTasks });
  return grants;
}
