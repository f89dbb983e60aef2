import { FREE_RUN_TASK_LIMIT, FREE_RUN_TASK_WORKSPACE_LIMIT } from '@runtasks/shared/domain';
import { type Organization } from '@runtasks/shared/db';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import { organizationSettingsAttributes } from '../routes/organization-settings.ts';

/**
 * Every organization has one project, HCP's default project, which holds all its workspaces (projects
 * beyond it are not available): its id is made from the organization's, so it needs no row.
 */
export const defaultProjectId = (organization: Pick<Organization, 'id'>): string => `prj-${organization.id.slice('org-'.length)}`;

export function serializeDefaultProject(organization: Organization): Resource {
  const id = defaultProjectId(organization);
  return {
    id,
    type: 'projects',
    attributes: { name: 'Default Project', description: null, 'created-at': timestamp(organization.createdAt) },
    relationships: { organization: toOne('organizations', organization.name) },
    links: selfLink(`/projects/${id}`),
  };
}

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
      ...organizationSettingsAttributes(organization),
      'created-at': timestamp(organization.createdAt),
      'updated-at': timestamp(organization.updatedAt),
      ...(permissions && { permissions }),
    },
    relationships: {
      'entitlement-set': { data: { id: organization.id, type: 'entitlement-sets' } },
      'default-project': toOne('projects', defaultProjectId(organization)),
      // No agent pools here: never a default one.
      'default-agent-pool': toOne('agent-pools', null),
    },
    links: selfLink(`/organizations/${organization.name}`),
  };
}

/** `sso`: whether the site has single sign-on for the run pages (OIDC_ISSUER is set). */
export function serializeEntitlementSet(organization: Organization, sso: boolean): Resource {
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
      // No state versions here (they answer 404): claiming storage would send clients to a missing API.
      'state-storage': false,
      // The audit trail (GET /organization/audit-trail) is served for every organization.
      'audit-logging': true,
      sso,
      // HCP's other entitlements: features this service does not have.
      agents: false,
      'configuration-designer': false,
      'cost-estimation': false,
      'module-tests-generation': false,
      'private-module-registry': false,
      'private-policy-agents': false,
      'private-vcs': false,
      'self-serve-billing': false,
      sentinel: false,
      'usage-reporting': false,
      'user-limit': null,
      'vcs-integrations': false,
      'waypoint-actions': false,
      'waypoint-templates-and-addons': false,
    },
    links: selfLink(`/entitlement-sets/${organization.id}`),
  };
}
