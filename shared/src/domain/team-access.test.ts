import { describe, expect, it } from '@jest/globals';
import { TEAM_WORKSPACE_ACCESS, type TeamWorkspaceAccess } from './statuses.ts';
import {
  CUSTOM_DEFAULTS,
  CUSTOM_PERMISSION_ATTRIBUTES,
  decideTeamAccess,
  IMPLIED_PERMISSIONS,
  type CustomPermissionAttribute,
  type CustomPermissionInput,
  type CustomPermissions,
} from './team-access.ts';

const ATTRIBUTES = Object.keys(CUSTOM_PERMISSION_ATTRIBUTES) as CustomPermissionAttribute[];
const FIXED = TEAM_WORKSPACE_ACCESS.filter((access): access is Exclude<TeamWorkspaceAccess, 'custom'> => access !== 'custom');

/** A value for each attribute that differs from the custom defaults. */
const SAMPLE: Required<CustomPermissionInput> = {
  runs: 'apply',
  variables: 'write',
  'state-versions': 'read-outputs',
  'sentinel-mocks': 'read',
  'workspace-locking': true,
  'run-tasks': true,
};

const fresh = (access: TeamWorkspaceAccess = 'custom', permissions: CustomPermissions = CUSTOM_DEFAULTS) => ({ access, permissions });

describe('decideTeamAccess', () => {
  it.each(FIXED)('gives the level %s exactly the permissions HCP says it implies', (access) => {
    expect(decideTeamAccess(fresh(), { access })).toEqual({ ok: true, access, permissions: IMPLIED_PERMISSIONS[access] });
  });

  it('implies more with each level, and only admin manages run tasks', () => {
    expect(IMPLIED_PERMISSIONS).toEqual({
      read: { runs: 'read', variables: 'read', stateVersions: 'read', sentinelMocks: 'none', workspaceLocking: false, runTasks: false },
      plan: { runs: 'plan', variables: 'read', stateVersions: 'read', sentinelMocks: 'none', workspaceLocking: false, runTasks: false },
      write: { runs: 'apply', variables: 'write', stateVersions: 'write', sentinelMocks: 'read', workspaceLocking: true, runTasks: false },
      admin: { runs: 'apply', variables: 'write', stateVersions: 'write', sentinelMocks: 'read', workspaceLocking: true, runTasks: true },
    });
  });

  const refusals = FIXED.flatMap((access) => ATTRIBUTES.map((attribute) => [access, attribute] as const));
  it.each(refusals)('refuses %s with the custom attribute %s, naming it in HCP words', (access, attribute) => {
    const decision = decideTeamAccess(fresh(), { access, [attribute]: SAMPLE[attribute] });
    expect(decision).toEqual({
      ok: false,
      attribute,
      detail: `${CUSTOM_PERMISSION_ATTRIBUTES[attribute].label} is read-only when access level is '${access}'; use the 'custom' access level to set this attribute.`,
    });
  });

  it.each(FIXED)('refuses a custom attribute on an existing %s access when the request names no level', (access) => {
    const decision = decideTeamAccess(fresh(access, IMPLIED_PERMISSIONS[access]), { variables: 'none' });
    expect(decision).toMatchObject({ ok: false, attribute: 'variables' });
  });

  it.each(ATTRIBUTES)('takes %s as given with access custom, keeping the others', (attribute) => {
    const decision = decideTeamAccess(fresh(), { access: 'custom', [attribute]: SAMPLE[attribute] });
    const key = CUSTOM_PERMISSION_ATTRIBUTES[attribute].key;
    expect(decision).toEqual({ ok: true, access: 'custom', permissions: { ...CUSTOM_DEFAULTS, [key]: SAMPLE[attribute] } });
  });

  it('starts a new custom access with read runs and nothing else', () => {
    expect(decideTeamAccess(fresh(), {})).toEqual({ ok: true, access: 'custom', permissions: CUSTOM_DEFAULTS });
    expect(CUSTOM_DEFAULTS).toEqual({
      runs: 'read',
      variables: 'none',
      stateVersions: 'none',
      sentinelMocks: 'none',
      workspaceLocking: false,
      runTasks: false,
    });
  });

  it.each(FIXED)('keeps what %s implied when the access becomes custom, changing only what is given', (access) => {
    const decision = decideTeamAccess(fresh(access, IMPLIED_PERMISSIONS[access]), { access: 'custom', runs: 'plan' });
    expect(decision).toEqual({ ok: true, access: 'custom', permissions: { ...IMPLIED_PERMISSIONS[access], runs: 'plan' } });
  });
});
