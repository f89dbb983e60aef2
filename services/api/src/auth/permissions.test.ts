import { describe, expect, it } from '@jest/globals';
import {
  organizationPermissions,
  runPermissions,
  teamPermissions,
  workspacePermissions,
  workspaceRights,
  type WorkspaceGrant,
  type WorkspaceRights,
} from './permissions.ts';
import type { Principal } from './principal.ts';

const ORG = 'org-acme';
const admin: Principal = { kind: 'admin', tokenId: 'at-admin' };
const owner: Principal = { kind: 'organization', tokenId: 'at-owner', organizationId: ORG };
const foreignOwner: Principal = { kind: 'organization', tokenId: 'at-other', organizationId: 'org-other' };
const team = (rights: Partial<Record<'manageRunTasks' | 'manageWorkspaces' | 'managePolicyOverrides', boolean>> = {}): Principal => ({
  kind: 'team',
  tokenId: 'at-team',
  organizationId: ORG,
  teamId: 'team-1',
  manageRunTasks: false,
  manageWorkspaces: false,
  managePolicyOverrides: false,
  ...rights,
});

/** The keys go-tfe's OrganizationPermissions decodes that this service has no feature for. */
const ORGANIZATION_ABSENT = [
  'can-create-workspace-migration',
  'can-deploy-no-code-modules',
  'can-manage-auditing',
  'can-manage-no-code-modules',
  'can-update-oauth',
  'can-update-sentinel',
];

describe('organizationPermissions', () => {
  it.each<[string, Principal, Record<string, boolean>]>([
    [
      'the site admin',
      admin,
      {
        'can-create-team': true,
        'can-create-workspace': true,
        'can-destroy': true,
        'can-manage-run-tasks': true,
        'can-traverse': true,
        'can-update': true,
        'can-update-api-token': true,
      },
    ],
    [
      'its organization token',
      owner,
      {
        'can-create-team': true,
        'can-create-workspace': true,
        'can-destroy': true,
        'can-manage-run-tasks': true,
        'can-traverse': true,
        'can-update': true,
        'can-update-api-token': true,
      },
    ],
    [
      "another organization's token",
      foreignOwner,
      {
        'can-create-team': false,
        'can-create-workspace': false,
        'can-destroy': false,
        'can-manage-run-tasks': false,
        'can-traverse': false,
        'can-update': false,
        'can-update-api-token': false,
      },
    ],
    [
      'a team without organization access',
      team(),
      {
        'can-create-team': false,
        'can-create-workspace': false,
        'can-destroy': false,
        'can-manage-run-tasks': false,
        'can-traverse': true,
        'can-update': false,
        'can-update-api-token': false,
      },
    ],
    [
      'a team managing run tasks',
      team({ manageRunTasks: true }),
      {
        'can-create-team': false,
        'can-create-workspace': false,
        'can-destroy': false,
        'can-manage-run-tasks': true,
        'can-traverse': true,
        'can-update': false,
        'can-update-api-token': false,
      },
    ],
    [
      'a team managing workspaces',
      team({ manageWorkspaces: true }),
      {
        'can-create-team': false,
        'can-create-workspace': true,
        'can-destroy': false,
        'can-manage-run-tasks': false,
        'can-traverse': true,
        'can-update': false,
        'can-update-api-token': false,
      },
    ],
  ])('%s', (_, principal, expected) => {
    expect(organizationPermissions(principal, ORG)).toEqual({
      ...expected,
      ...Object.fromEntries(ORGANIZATION_ABSENT.map((key) => [key, false])),
    });
  });
});

describe('workspaceRights', () => {
  const full: WorkspaceRights = { manage: true, runs: 'apply', runTasks: true };
  const none: WorkspaceRights = { manage: false, runs: null, runTasks: false };
  const planGrant: WorkspaceGrant = { runs: 'plan', runTasks: true };
  it.each<[string, Principal, WorkspaceGrant | null, WorkspaceRights]>([
    ['the site admin, without a grant', admin, null, full],
    ['its organization token', owner, null, full],
    ["another organization's token", foreignOwner, null, none],
    ['a team managing workspaces, without a grant', team({ manageWorkspaces: true }), null, full],
    ['a team without access', team(), null, none],
    ['a team with a read grant', team(), { runs: 'read', runTasks: false }, { manage: false, runs: 'read', runTasks: false }],
    ['a team with a custom plan grant and run tasks', team(), planGrant, { manage: false, runs: 'plan', runTasks: true }],
    ['a team managing run tasks (organization level only)', team({ manageRunTasks: true }), null, none],
  ])('%s', (_, principal, grant, expected) => {
    expect(workspaceRights(principal, ORG, grant)).toEqual(expected);
  });
});

describe('workspacePermissions', () => {
  const always = { 'can-update-variable': false };
  it.each<[WorkspaceRights, Record<string, boolean>]>([
    [
      { manage: true, runs: 'apply', runTasks: true },
      {
        'can-destroy': true,
        'can-force-delete': true,
        'can-manage-run-tasks': true,
        'can-queue-apply': true,
        'can-queue-destroy': true,
        'can-queue-run': true,
        'can-read-settings': true,
        'can-update': true,
        'can-lock': true,
        'can-unlock': true,
        'can-force-unlock': true,
      },
    ],
    [
      { manage: false, runs: 'apply', runTasks: false },
      {
        'can-destroy': false,
        'can-force-delete': false,
        'can-manage-run-tasks': false,
        'can-queue-apply': true,
        'can-queue-destroy': true,
        'can-queue-run': true,
        'can-read-settings': true,
        'can-update': false,
        'can-lock': true,
        'can-unlock': true,
        'can-force-unlock': false,
      },
    ],
    [
      { manage: false, runs: 'plan', runTasks: true },
      {
        'can-destroy': false,
        'can-force-delete': false,
        'can-manage-run-tasks': true,
        'can-queue-apply': false,
        'can-queue-destroy': true,
        'can-queue-run': true,
        'can-read-settings': true,
        'can-update': false,
        'can-lock': false,
        'can-unlock': false,
        'can-force-unlock': false,
      },
    ],
    [
      { manage: false, runs: 'read', runTasks: false },
      {
        'can-destroy': false,
        'can-force-delete': false,
        'can-manage-run-tasks': false,
        'can-queue-apply': false,
        'can-queue-destroy': false,
        'can-queue-run': false,
        'can-read-settings': true,
        'can-update': false,
        'can-lock': false,
        'can-unlock': false,
        'can-force-unlock': false,
      },
    ],
  ])('%j', (rights, expected) => {
    expect(workspacePermissions(rights)).toEqual({ ...expected, ...always });
  });
});

describe('runPermissions and teamPermissions', () => {
  it.each([true, false])('run: may apply = %s', (mayApply) => {
    expect(runPermissions(mayApply)).toEqual({
      'can-apply': mayApply,
      'can-cancel': mayApply,
      'can-discard': mayApply,
      'can-force-cancel': mayApply,
      'can-force-execute': mayApply,
    });
  });

  it.each<[string, Principal, boolean, boolean]>([
    ['the site admin', admin, false, true],
    ['its organization token', owner, false, true],
    ['its organization token, on the owners team', owner, true, false],
    ['the site admin, on the owners team', admin, true, false],
    ["another organization's token", foreignOwner, false, false],
    ['a team, even managing workspaces', team({ manageWorkspaces: true }), false, false],
  ])('team, for %s (owners team: %s): can-destroy %s', (_, principal, isOwnersTeam, canDestroy) => {
    expect(teamPermissions(principal, ORG, isOwnersTeam)).toEqual({ 'can-destroy': canDestroy, 'can-update-membership': false });
  });
});
