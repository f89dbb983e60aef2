import { FREE_RUN_TASK_LIMIT, FREE_RUN_TASK_WORKSPACE_LIMIT } from '@runtasks/shared/domain';
import { type Organization } from '@runtasks/shared/db';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, type Resource } from '../http/jsonapi.ts';

/**
 * HCP addresses organizations by name: the resource id is the name, `external-id` the opaque id.
 * `permissions` are the caller's (left out where the caller is not known, e.g. an included resource).
 */
export function serializeOrganization(organization: Organization, permissions?: Permissions): Resource {
  return {
    id: organization.name,
    type: 'organizations',
    attributes: {
      name: organization.name,
      email: organization.email,
      'external-id': organization.id,
      edition: organization.edition,
      'task-overrides-enabled': organization.taskOverridesEnabled,
      'created-at': timestamp(organization.createdAt),
      'updated-at': timestamp(organization.updatedAt),
      ...(permissions && { permissions }),
    },
    relationships: {
      'entitlement-set': { data: { id: organization.id, type: 'entitlement-sets' } },
    },
    links: selfLink(`/organizations/${organization.name}`),
  };
}

export function serializeEntitlementSet(organization: Organization): Resource {
  const free = organization.edition === 'free';
  return {
    id: organization.id,
    type: 'entitlement-sets',
    attributes: {
      'run-tasks': true,
      'run-task-limit': free ? FREE_RUN_TASK_LIMIT : null,
      'run-task-workspace-limit': free ? FREE_RUN_TASK_WORKSPACE_LIMIT : null,
      'run-task-mandatory-enforcement-limit': null,
      'global-run-tasks': !free && organization.globalRunTasksEnabled,
      'private-run-tasks': false,
      teams: true,
      operations: true,
      'state-storage': true,
    },
    links: selfLink(`/entitlement-sets/${organization.id}`),
  };
}
