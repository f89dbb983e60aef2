import type { Organization } from '@runtasks/shared/db';
import { selfLink, type Resource } from '../http/jsonapi.ts';

/**
 * An organization as the site admin sees it (`/admin/organizations`), with Terraform Enterprise's
 * attributes. The timeouts have two names in TFE (the older `terraform-build-worker-*`); both show one value.
 */
export function serializeAdminOrganization(organization: Organization): Resource {
  return {
    id: organization.name,
    type: 'organizations',
    attributes: {
      name: organization.name,
      'external-id': organization.id,
      'notification-email': organization.email,
      'access-beta-tools': organization.accessBetaTools,
      'global-module-sharing': organization.globalModuleSharing,
      'global-provider-sharing': organization.globalProviderSharing,
      // Disabling organizations and workspace limits are not available (the update refuses them).
      'is-disabled': false,
      'workspace-limit': null,
      // No single sign-on here.
      'sso-enabled': false,
      'terraform-build-worker-apply-timeout': organization.terraformBuildWorkerApplyTimeout,
      'terraform-build-worker-plan-timeout': organization.terraformBuildWorkerPlanTimeout,
      'apply-timeout': organization.terraformBuildWorkerApplyTimeout,
      'plan-timeout': organization.terraformBuildWorkerPlanTimeout,
      'terraform-worker-sudo-enabled': organization.terraformWorkerSudoEnabled,
    },
    links: selfLink(`/admin/organizations/${organization.name}`),
  };
}
