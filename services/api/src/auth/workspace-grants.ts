import type { EntityManager } from '@mikro-orm/core';
import { TeamWorkspace } from '@runtasks/shared/db';
import { TEAM_RUNS_ACCESS } from '@runtasks/shared/domain';
import type { WorkspaceGrant } from './permissions.ts';
import { organizationRights, type Principal } from './principal.ts';

/** The greater of two runs permissions (read < plan < apply). */
const wider = (a: WorkspaceGrant['runs'], b: WorkspaceGrant['runs']): WorkspaceGrant['runs'] =>
  TEAM_RUNS_ACCESS.indexOf(a) >= TEAM_RUNS_ACCESS.indexOf(b) ? a : b;

/**
 * The caller's team access rows for these workspaces, by workspace id: one query for a whole page,
 * and none at all for callers whose rights do not depend on a row (the site admin, organization
 * tokens, "manage workspaces" teams). A member of several teams with access to one workspace holds
 * the union of their rows.
 */
export async function workspaceGrants(
  em: EntityManager,
  principal: Principal,
  workspaceIds: readonly string[],
): Promise<Map<string, WorkspaceGrant>> {
  const grants = new Map<string, WorkspaceGrant>();
  const teamIds = [...(organizationRights(principal)?.values() ?? [])].flatMap((rights) =>
    rights.owner || rights.manageWorkspaces ? [] : rights.teamIds,
  );
  if (teamIds.length === 0 || workspaceIds.length === 0) return grants;
  const rows = await em.find(
    TeamWorkspace,
    { team: { $in: teamIds }, workspace: { $in: [...workspaceIds] } },
    { fields: ['team', 'workspace', 'runs', 'runTasks'], populate: [] },
  );
  for (const row of rows) {
    const held = grants.get(row.workspace.id);
    grants.set(
      row.workspace.id,
      held ? { runs: wider(held.runs, row.runs), runTasks: held.runTasks || row.runTasks } : { runs: row.runs, runTasks: row.runTasks },
    );
  }
  return grants;
}
