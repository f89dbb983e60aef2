import type { Team, TeamWorkspace } from '@runtasks/shared/db';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toMany, toOne, type Resource } from '../http/jsonapi.ts';
import { organizationAccessOf } from '../routes/team-organization-access.ts';

/** A team's members: their user ids and organization membership ids, in one order. */
export interface TeamMembers {
  userIds: readonly string[];
  membershipIds: readonly string[];
}

/** `permissions` are the caller's; `members`, where known, give `users-count` and the `users` and `organization-memberships` relationships. */
export function serializeTeam(team: Team, organizationName: string, permissions?: Permissions, members?: TeamMembers): Resource {
  return {
    id: team.id,
    type: 'teams',
    attributes: {
      name: team.name,
      visibility: team.visibility,
      'users-count': members?.userIds.length ?? 0,
      'organization-access': organizationAccessOf(team),
      'sso-team-id': team.ssoTeamId ?? null,
      'allow-member-token-management': team.allowMemberTokenManagement,
      'is-unified': false,
      'created-at': timestamp(team.createdAt),
      'updated-at': timestamp(team.updatedAt),
      ...(permissions && { permissions }),
    },
    relationships: {
      organization: toOne('organizations', organizationName),
      ...(members && {
        users: toMany('users', members.userIds),
        'organization-memberships': toMany('organization-memberships', members.membershipIds),
      }),
    },
    links: selfLink(`/teams/${team.id}`),
  };
}

export function serializeTeamWorkspace(access: TeamWorkspace): Resource {
  return {
    id: access.id,
    type: 'team-workspaces',
    attributes: {
      access: access.access,
      runs: access.runs,
      variables: access.variables,
      'state-versions': access.stateVersions,
      'sentinel-mocks': access.sentinelMocks,
      'workspace-locking': access.workspaceLocking,
      'run-tasks': access.runTasks,
      'created-at': timestamp(access.createdAt),
      'updated-at': timestamp(access.updatedAt),
    },
    relationships: {
      team: toOne('teams', access.team.id),
      workspace: toOne('workspaces', access.workspace.id),
    },
    links: selfLink(`/team-workspaces/${access.id}`),
  };
}
