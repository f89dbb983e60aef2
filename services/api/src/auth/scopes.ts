import type { TeamRunsAccess } from '@runtasks/shared/domain';
import { organizationRights, organizationsWhere, rightsIn, type Principal } from './principal.ts';

/**
 * Organization-scoped filters. Every lookup puts the caller's scope in the same query as the id, so
 * "missing", "another organization's" and "not permitted" are one and the same empty result
 * (never fetch-then-check). `null` means the caller may see nothing of that kind.
 */
export type WorkspaceNeed = 'read' | 'manage' | 'run-tasks' | 'runs:read' | 'runs:plan' | 'runs:apply';

/** A plain filter object: merged into MikroORM queries (cast at the call site to the entity's filter type). */
export type ScopeFilter = Record<string, unknown>;
type Scope = ScopeFilter | null;

/** The organizations the caller reaches at all (any member sees its organization). */
export function organizationScope(principal: Principal): Scope {
  return inOrganizations(
    organizationsWhere(principal, () => true),
    'id',
  );
}

/** Owners only (the site admin, organization tokens, the owners team): teams, tokens, team access, organization settings. */
export function ownerOrganizationScope(principal: Principal): Scope {
  return inOrganizations(
    organizationsWhere(principal, (rights) => rights.owner),
    'id',
  );
}

/** A filter on `property` for these organizations (null: any, the site admin); null where there are none. */
export function inOrganizations(organizationIds: readonly string[] | null, property: string): Scope {
  if (organizationIds === null) return {};
  if (organizationIds.length === 0) return null;
  return { [property]: organizationIds.length === 1 ? organizationIds[0] : { $in: [...organizationIds] } };
}

/**
 * What a team's access to a workspace must grant for each need: the one description that both the
 * ORM filter (`workspaceScope`) and the raw SQL condition (`workspaceAccessSql`) are built from.
 * An empty requirement means any access will do (every team that sees a workspace reads its runs).
 * `organizationWide`: organization permissions that grant the need in every workspace of the
 * organization, with or without access to it: HCP's "manage policy overrides" implies reading runs
 * (and so their task stages and results) everywhere, which overriding needs.
 */
interface TeamRequirement {
  runs?: readonly TeamRunsAccess[];
  runTasks?: true;
  organizationWide?: readonly OrganizationWideGrant[];
}
type OrganizationWideGrant = 'managePolicyOverrides';
const TEAM_REQUIREMENT: Record<Exclude<WorkspaceNeed, 'manage'>, TeamRequirement> = {
  read: {},
  'runs:read': { organizationWide: ['managePolicyOverrides'] },
  'runs:plan': { runs: ['plan', 'apply'] },
  'runs:apply': { runs: ['apply'] },
  'run-tasks': { runTasks: true },
};

/** The runs permissions a 403 names to a caller who reads the run or workspace but lacks one. */
export type RunsNeed = 'runs:plan' | 'runs:apply';
export const isRunsNeed = (need: WorkspaceNeed): need is RunsNeed => need === 'runs:plan' || need === 'runs:apply';

/** What each runs need takes, in HCP's words for team access. */
export const NEED_PERMISSION: Record<RunsNeed, string> = {
  'runs:plan': 'the "plan" or "apply" runs permission on the workspace',
  'runs:apply': 'the "apply" runs permission on the workspace',
};

/**
 * Whose workspaces the caller reaches for a need: every workspace of some organizations (null: of
 * every one, the site admin), and besides those, the workspaces whose access for one of some teams
 * grants the need. A member of several teams holds the union of their access, in each organization.
 */
interface WorkspaceAccess {
  organizationIds: string[] | null;
  teamIds: string[];
}
/** The needs a pipeline has in its one workspace: reading it and driving its runs. */
const PIPELINE_NEEDS: ReadonlySet<WorkspaceNeed> = new Set(['read', 'runs:read', 'runs:plan', 'runs:apply']);

function workspaceAccess(principal: Principal, need: WorkspaceNeed): WorkspaceAccess {
  // A pipeline's one workspace stands among the "teams" (a workspace id never names a team): the SQL condition takes either.
  if (principal.kind === 'pipeline') return { organizationIds: [], teamIds: PIPELINE_NEEDS.has(need) ? [principal.workspaceId] : [] };
  const wide = need === 'manage' ? [] : (TEAM_REQUIREMENT[need].organizationWide ?? []);
  // "Manage workspaces" is admin access to every workspace of the organization, as in HCP.
  const organizationIds = organizationsWhere(
    principal,
    (rights) => rights.owner || rights.manageWorkspaces || wide.some((grant) => rights[grant]),
  );
  if (organizationIds === null) return { organizationIds, teamIds: [] };
  const everywhere = new Set(organizationIds);
  const teamIds = [...(organizationRights(principal) ?? [])].flatMap(([organizationId, rights]) =>
    everywhere.has(organizationId) ? [] : rights.teamIds,
  );
  return { organizationIds, teamIds };
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
  if (principal.kind === 'pipeline')
    return PIPELINE_NEEDS.has(need) ? { organization: principal.organizationId, id: principal.workspaceId } : null;
  const access = workspaceAccess(principal, need);
  const everywhere = inOrganizations(access.organizationIds, 'organization');
  if (access.organizationIds === null) return everywhere;
  const branches: ScopeFilter[] = everywhere ? [everywhere] : [];
  // A team reaches no workspace for 'manage'; `$some` keeps a workspace one row however many of the teams grant it.
  if (need !== 'manage' && access.teamIds.length > 0) {
    const team = access.teamIds.length === 1 ? access.teamIds[0] : { $in: access.teamIds };
    branches.push({ teamAccess: { $some: { team, ...teamAccessFilter(TEAM_REQUIREMENT[need]) } } });
  }
  if (branches.length === 0) return null;
  return branches.length === 1 ? (branches[0] ?? null) : { $or: branches };
}

/** Workspace creation is an organization-level permission: owners and "manage workspaces" teams. */
export function canCreateWorkspaces(principal: Principal, organizationId: string): boolean {
  const rights = rightsIn(principal, organizationId);
  return rights !== null && (rights.owner || rights.manageWorkspaces);
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

/** The needs a raw statement's condition can be built for. */
export type SqlWorkspaceNeed = 'read' | 'runs:read' | 'runs:plan' | 'runs:apply';

/**
 * `workspaceScope(principal, need)` for the raw paths, as one fixed SQL condition (so the statement can
 * be prepared) over the workspace's `columns`, with two parameters from `readableWorkspaceParams` for
 * the same need: the organizations whose every workspace the caller reaches (null: any, the site
 * admin), and the teams whose access to a workspace, as TEAM_REQUIREMENT asks for `need`, reaches it
 * (or, for a pipeline, its one workspace's id).
 */
export const workspaceAccessSql = (
  columns: WorkspaceColumns,
  organizationParam: number,
  teamParam: number,
  need: SqlWorkspaceNeed,
): string =>
  `($${organizationParam}::text[] is null or ${columns.organizationId} = any($${organizationParam}::text[])
   or ${columns.workspaceId} = any($${teamParam}::text[])
   or exists (select 1 from team_workspaces ta where ta.workspace_id = ${columns.workspaceId} and ta.team_id = any($${teamParam}::text[])${teamAccessSql(
     TEAM_REQUIREMENT[need],
   )}))`;

export const readableWorkspaceSql = (columns: WorkspaceColumns, organizationParam: number, teamParam: number): string =>
  workspaceAccessSql(columns, organizationParam, teamParam, 'runs:read');

/**
 * The two parameters of `workspaceAccessSql` for the caller and a need (arrays, for node-postgres). A
 * statement that checks several needs with one pair must name needs that reach the same workspaces'
 * teams (none organization-wide).
 */
export function readableWorkspaceParams(principal: Principal, need: SqlWorkspaceNeed): [string[] | null, string[]] {
  const access = workspaceAccess(principal, need);
  return [access.organizationIds, access.teamIds];
}
