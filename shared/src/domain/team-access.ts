import type { TeamRunsAccess, TeamWorkspaceAccess } from './statuses.ts';

/** HCP's custom workspace permissions besides `runs` and `run-tasks`. */
export const TEAM_VARIABLES_ACCESS = ['none', 'read', 'write'] as const;
export type TeamVariablesAccess = (typeof TEAM_VARIABLES_ACCESS)[number];

export const TEAM_STATE_VERSIONS_ACCESS = ['none', 'read-outputs', 'read', 'write'] as const;
export type TeamStateVersionsAccess = (typeof TEAM_STATE_VERSIONS_ACCESS)[number];

export const TEAM_SENTINEL_MOCKS_ACCESS = ['none', 'read'] as const;
export type TeamSentinelMocksAccess = (typeof TEAM_SENTINEL_MOCKS_ACCESS)[number];

/** Every custom permission of a team's access to a workspace. */
export interface CustomPermissions {
  runs: TeamRunsAccess;
  variables: TeamVariablesAccess;
  stateVersions: TeamStateVersionsAccess;
  sentinelMocks: TeamSentinelMocksAccess;
  workspaceLocking: boolean;
  runTasks: boolean;
}

/** What a new `custom` access starts with, as in HCP: read runs, nothing else. */
export const CUSTOM_DEFAULTS: CustomPermissions = {
  runs: 'read',
  variables: 'none',
  stateVersions: 'none',
  sentinelMocks: 'none',
  workspaceLocking: false,
  runTasks: false,
};

/** The permissions each fixed access level implies, as HCP documents them. */
export const IMPLIED_PERMISSIONS: Record<Exclude<TeamWorkspaceAccess, 'custom'>, CustomPermissions> = {
  read: { runs: 'read', variables: 'read', stateVersions: 'read', sentinelMocks: 'none', workspaceLocking: false, runTasks: false },
  plan: { runs: 'plan', variables: 'read', stateVersions: 'read', sentinelMocks: 'none', workspaceLocking: false, runTasks: false },
  write: { runs: 'apply', variables: 'write', stateVersions: 'write', sentinelMocks: 'read', workspaceLocking: true, runTasks: false },
  admin: { runs: 'apply', variables: 'write', stateVersions: 'write', sentinelMocks: 'read', workspaceLocking: true, runTasks: true },
};

/** The attribute names (as in the API) of the custom permissions, with HCP's words for them. */
export const CUSTOM_PERMISSION_ATTRIBUTES = {
  runs: { key: 'runs', label: 'Runs' },
  variables: { key: 'variables', label: 'Variables' },
  'state-versions': { key: 'stateVersions', label: 'State versions' },
  'sentinel-mocks': { key: 'sentinelMocks', label: 'Sentinel mocks' },
  'workspace-locking': { key: 'workspaceLocking', label: 'Workspace locking' },
  'run-tasks': { key: 'runTasks', label: 'Run tasks' },
} as const satisfies Record<string, { key: keyof CustomPermissions; label: string }>;

export type CustomPermissionAttribute = keyof typeof CUSTOM_PERMISSION_ATTRIBUTES;

export type CustomPermissionInput = Partial<{
  [A in CustomPermissionAttribute]: CustomPermissions[(typeof CUSTOM_PERMISSION_ATTRIBUTES)[A]['key']];
}>;

export type AccessDecision =
  | { ok: true; access: TeamWorkspaceAccess; permissions: CustomPermissions }
  | { ok: false; attribute: CustomPermissionAttribute; detail: string };

/**
 * The access and permissions a team has after a request. A fixed level replaces every custom
 * permission with what it implies, so a custom permission given with one would be dropped: refused, as
 * HCP refuses it. `custom` keeps what was there and takes what is given.
 */
export function decideTeamAccess(
  current: { access: TeamWorkspaceAccess; permissions: CustomPermissions },
  requested: { access?: TeamWorkspaceAccess | undefined } & CustomPermissionInput,
): AccessDecision {
  const access = requested.access ?? current.access;
  const given = (Object.keys(CUSTOM_PERMISSION_ATTRIBUTES) as CustomPermissionAttribute[]).filter((name) => requested[name] !== undefined);
  if (access !== 'custom') {
    const [attribute] = given;
    if (attribute)
      return {
        ok: false,
        attribute,
        detail: `${CUSTOM_PERMISSION_ATTRIBUTES[attribute].label} is read-only when access level is '${access}'; use the 'custom' access level to set this attribute.`,
      };
    return { ok: true, access, permissions: { ...IMPLIED_PERMISSIONS[access] } };
  }
  // Leaving a fixed level for custom starts from what that level implied (HCP keeps the effective rights).
  const permissions: CustomPermissions = { ...current.permissions };
  for (const name of given) Object.assign(permissions, { [CUSTOM_PERMISSION_ATTRIBUTES[name].key]: requested[name] });
  return { ok: true, access, permissions };
}
