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

const TEAM_ACCESS_FOR: Record<Exclude<WorkspaceNeed, 'manage'>, Record<string, unknown>> = {
  read: {},
  'runs:read': {},
  'runs:plan': { runs: { $in: ['plan', 'apply'] } },
  'runs:apply': { runs: 'apply' },
  'run-tasks': { runTasks: true },
};

export function workspaceScope(principal: Principal, need: WorkspaceNeed): Scope {
  if (principal.kind === 'admin') return {};
  const organization = principal.organizationId;
  if (principal.kind === 'organization') return { organization };
  // "Manage workspaces" is admin access to every workspace of the organization, as in HCP.
  if (principal.manageWorkspaces) return { organization };
  if (need === 'manage') return null;
  return { organization, teamAccess: { team: principal.teamId, ...TEAM_ACCESS_FOR[need] } };
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

/** What workspaceAccessSql asks of a team's access for each need, as TEAM_ACCESS_FOR does. */
const TEAM_RUNS_SQL = {
  'runs:read': '',
  'runs:plan': ` and ta.runs in ('plan', 'apply')`,
  'runs:apply': ` and ta.runs = 'apply'`,
} as const;

/**
 * `workspaceScope(principal, need)` for the raw paths, as one fixed SQL condition (so the statement can
 * be prepared) over the workspace's `columns`, with two parameters from `readableWorkspaceParams`: the
 * organization (null: any, the site admin) and the team whose access the workspace needs (null: none
 * needed), with the access TEAM_ACCESS_FOR asks of the team for `need` (any access reads runs).
 */
export const workspaceAccessSql = (
  columns: WorkspaceColumns,
  organizationParam: number,
  teamParam: number,
  need: 'runs:read' | 'runs:plan' | 'runs:apply' = 'runs:read',
): string =>
  `($${organizationParam}::text is null or ${columns.organizationId} = $${organizationParam})
   and ($${teamParam}::text is null or exists (select 1 from team_workspaces ta where ta.workspace_id = ${columns.workspaceId} and ta.team_id = $${teamParam}${
     TEAM_RUNS_SQL[need]
   }))`;

export const readableWorkspaceSql = (columns: WorkspaceColumns, organizationParam: number, teamParam: number): string =>
  workspaceAccessSql(columns, organizationParam, teamParam, 'runs:read');

export function readableWorkspaceParams(principal: Principal): [string | null, string | null] {
  if (principal.kind === 'admin') return [null, null];
  if (principal.kind === 'organization' || principal.manageWorkspaces) return [principal.organizationId, null];
  return [principal.organizationId, principal.teamId];
}
