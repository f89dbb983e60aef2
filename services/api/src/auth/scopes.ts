import type { TeamRunsAccess } from '@runtasks/shared/domain';
import type { Principal } from './principal.ts';

/**
 * Organization-scoped filters. Every lookup puts the caller's scope in the same query as the id, so
 * "missing", "another organization's" and "not permitted" are one and the same empty result
 * (never fetch-then-check). `null` means the caller may see nothing of that kind.
 */
export type WorkspaceNeed = 'read' | 'manage' | 'run-tasks' | 'runs:read' | 'runs:plan' | 'runs:apply';

/** A plain filter object: merged into MikroORM queries (cast at the call site to the entity's filter type). */
export type ScopeFilter = Record<string, unknown>;
type Scope = ScopeFilter | null;

export function organizationScope(principal: Principal): Scope {
  return principal.kind === 'admin' ? {} : { id: principal.organizationId };
}

/** Owners (site admin, organization token) only: teams, tokens, team access, organization settings. */
export function ownerOrganizationScope(principal: Principal): Scope {
  if (principal.kind === 'admin') return {};
  if (principal.kind === 'organization') return { id: principal.organizationId };
  return null;
}

/**
 * What a team's access to a workspace must grant for each need: the one description that both the
 * ORM filter (`workspaceScope`) and the raw SQL condition (`workspaceAccessSql`) are built from.
 * An empty requirement means any access will do (every team that sees a workspace reads its runs).
 */
interface TeamRequirement {
  runs?: readonly TeamRunsAccess[];
  runTasks?: true;
}
const TEAM_REQUIREMENT: Record<Exclude<WorkspaceNeed, 'manage'>, TeamRequirement> = {
  read: {},
  'runs:read': {},
  'runs:plan': { runs: ['plan', 'apply'] },
  'runs:apply': { runs: ['apply'] },
  'run-tasks': { runTasks: true },
};

/**
 * Whose workspaces the caller reaches: an organization (null: every one, the site admin) and the team
 * whose access each workspace must grant (null: none needed). A team reaches none for 'manage'.
 */
interface WorkspaceAccess {
  organizationId: string | null;
  teamId: string | null;
}
function workspaceAccess(principal: Principal): WorkspaceAccess {
  if (principal.kind === 'admin') return { organizationId: null, teamId: null };
  // "Manage workspaces" is admin access to every workspace of the organization, as in HCP.
  if (principal.kind === 'organization' || principal.manageWorkspaces) return { organizationId: principal.organizationId, teamId: null };
  return { organizationId: principal.organizationId, teamId: principal.teamId };
}

function teamAccessFilter(requirement: TeamRequirement): ScopeFilter {
  const filter: ScopeFilter = {};
  if (requirement.runs) filter['runs'] = { $in: [...requirement.runs] };
  if (requirement.runTasks) filter['runTasks'] = true;
  return filter;
}

/** The same requirement as SQL over `team_workspaces ta`; the values are constants, so the text stays fixed. */
function teamAccessSql(requirement: TeamRequirement): string {
  let sql = '';
  if (requirement.runs) sql += ` and ta.runs in (${requirement.runs.map((value) => `'${value}'`).join(', ')})`;
  if (requirement.runTasks) sql += ' and ta.run_tasks';
  return sql;
}

export function workspaceScope(principal: Principal, need: WorkspaceNeed): Scope {
  const access = workspaceAccess(principal);
  const scope: ScopeFilter = access.organizationId === null ? {} : { organization: access.organizationId };
  if (access.teamId === null) return scope;
  if (need === 'manage') return null;
  return { ...scope, teamAccess: { team: access.teamId, ...teamAccessFilter(TEAM_REQUIREMENT[need]) } };
}

/** Workspace creation is an organization-level permission. */
export function canCreateWorkspaces(principal: Principal, organizationId: string): boolean {
  if (principal.kind === 'admin') return true;
  if (principal.organizationId !== organizationId) return false;
  return principal.kind === 'organization' || principal.manageWorkspaces;
}

/** Where a raw statement finds the workspace's organization and id: the workspace row itself, or a copy. */
export interface WorkspaceColumns {
  organizationId: string;
  workspaceId: string;
}

export const WORKSPACE_ROW: WorkspaceColumns = { organizationId: 'w.organization_id', workspaceId: 'w.id' };
/**
 * A run's copies of its workspace's organization and id (alias `r`), written at creation; a workspace
 * never changes organization, so a statement that starts from a run needs no join to its workspace.
 */
export const RUN_ROW: WorkspaceColumns = { organizationId: 'r.organization_id', workspaceId: 'r.workspace_id' };

/**
 * `workspaceScope(principal, need)` for the raw paths, as one fixed SQL condition (so the statement can
 * be prepared) over the workspace's `columns`, with two parameters from `readableWorkspaceParams`: the
 * organization (null: any, the site admin) and the team whose access the workspace needs (null: none
 * needed), with the access TEAM_REQUIREMENT asks of the team for `need`.
 */
export const workspaceAccessSql = (
  columns: WorkspaceColumns,
  organizationParam: number,
  teamParam: number,
  need: 'runs:read' | 'runs:plan' | 'runs:apply' = 'runs:read',
): string =>
  `($${organizationParam}::text is null or ${columns.organizationId} = $${organizationParam})
   and ($${teamParam}::text is null or exists (select 1 from team_workspaces ta where ta.workspace_id = ${columns.workspaceId} and ta.team_id = $${teamParam}${teamAccessSql(
     TEAM_REQUIREMENT[need],
   )}))`;

export const readableWorkspaceSql = (columns: WorkspaceColumns, organizationParam: number, teamParam: number): string =>
  workspaceAccessSql(columns, organizationParam, teamParam, 'runs:read');

/** The two parameters of `workspaceAccessSql` for the caller (every need it takes shares them). */
export function readableWorkspaceParams(principal: Principal): [string | null, string | null] {
  const access = workspaceAccess(principal);
  return [access.organizationId, access.teamId];
}
