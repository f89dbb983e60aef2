import type { TeamRunsAccess } from '@runtasks/shared/domain';
import { isOwnerOf, rightsIn, type Principal } from './principal.ts';
import { canCreateWorkspaces } from './scopes.ts';

/**
 * The `permissions` objects HCP puts on organizations, workspaces, runs and teams, computed from the
 * same rules the routes enforce (scopes.ts, run-task-scope.ts): a `true` means the request it names
 * would be allowed. Keys for features this service does not have are always false.
 */
export type Permissions = Record<string, boolean>;

/** A team's access row for one workspace, as far as permissions need it. */
export interface WorkspaceGrant {
  runs: TeamRunsAccess;
  runTasks: boolean;
}

/** What the caller may do in one workspace. */
export interface WorkspaceRights {
  /** Update and delete the workspace (owners and "manage workspaces" teams). */
  manage: boolean;
  /** The runs permission: null when the caller has no access at all. */
  runs: TeamRunsAccess | null;
  /** Attach, change and detach the workspace's run tasks. */
  runTasks: boolean;
}

const FULL: WorkspaceRights = { manage: true, runs: 'apply', runTasks: true };
const NONE: WorkspaceRights = { manage: false, runs: null, runTasks: false };

/**
 * Owners and "manage workspaces" teams have every right in every workspace of their organization, as
 * workspaceScope grants them; another team has what its access row (`grant`) says, or nothing (for a
 * member of several teams, `grant` is the union of their rows: workspace-grants.ts).
 */
export function workspaceRights(principal: Principal, organizationId: string, grant: WorkspaceGrant | null): WorkspaceRights {
  const rights = rightsIn(principal, organizationId);
  if (!rights) return NONE;
  // Scoped to its one workspace already (scopes.ts): there it drives runs, and nothing more.
  if (principal.kind === 'pipeline') return { manage: false, runs: 'apply', runTasks: false };
  if (rights.owner || rights.manageWorkspaces) return FULL;
  return grant ? { manage: false, runs: grant.runs, runTasks: grant.runTasks } : NONE;
}

export function organizationPermissions(principal: Principal, organizationId: string): Permissions {
  const rights = rightsIn(principal, organizationId);
  const owner = rights?.owner === true;
  return {
    'can-create-team': owner,
    'can-create-workspace': canCreateWorkspaces(principal, organizationId),
    'can-create-workspace-migration': false,
    'can-deploy-no-code-modules': false,
    'can-destroy': owner,
    'can-manage-auditing': false,
    'can-manage-no-code-modules': false,
    'can-manage-run-tasks': rights !== null && (rights.owner || rights.manageRunTasks),
    'can-traverse': rights !== null,
    'can-update': owner,
    'can-update-api-token': owner,
    'can-update-oauth': false,
    'can-update-sentinel': false,
  };
}

export function workspacePermissions(rights: WorkspaceRights): Permissions {
  // Any run, destroy plans included, is queued with the "plan" runs permission; applying takes "apply".
  const mayQueue = rights.runs === 'plan' || rights.runs === 'apply';
  return {
    'can-destroy': rights.manage,
    // Locking and unlocking take the "apply" runs permission (a lock stops runs); force-unlock takes managing the workspace.
    'can-force-unlock': rights.manage,
    'can-lock': rights.runs === 'apply',
    'can-manage-run-tasks': rights.runTasks,
    'can-queue-apply': rights.runs === 'apply',
    'can-queue-destroy': mayQueue,
    'can-queue-run': mayQueue,
    'can-read-settings': rights.runs !== null,
    'can-unlock': rights.runs === 'apply',
    'can-update': rights.manage,
    // No variables here.
    'can-update-variable': false,
    // Deleting a workspace here never checks for managed resources: every delete is a force delete.
    'can-force-delete': rights.manage,
  };
}

/** Apply, cancel, discard, force-cancel and force-execute all take the "apply" runs permission. */
export function runPermissions(mayApply: boolean): Permissions {
  return {
    'can-apply': mayApply,
    'can-cancel': mayApply,
    'can-discard': mayApply,
    'can-force-cancel': mayApply,
    'can-force-execute': mayApply,
  };
}

/** Teams are managed by owners only, and the owners team is never deleted; there are no user memberships to update. */
export function teamPermissions(principal: Principal, organizationId: string, isOwnersTeam: boolean): Permissions {
  return {
    'can-destroy': !isOwnersTeam && isOwnerOf(principal, organizationId),
    'can-update-membership': false,
  };
}
