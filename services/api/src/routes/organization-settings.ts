import { COLLABORATOR_AUTH_POLICIES, EXECUTION_MODES } from '@runtasks/shared/domain';
import { type Organization } from '@runtasks/shared/db';
import { z } from 'zod';
import { flexibleBoolean, safeText } from './schemas.ts';

/** Minutes, as HCP takes them: a positive whole number, at most a year. */
const minutes = z
  .int('must be a whole number of minutes')
  .min(1, 'must be at least 1 minute')
  .max(525600, 'must be at most 525600 minutes');

/**
 * The organization settings go-tfe's create and update options carry, each stored (with HCP's default
 * when left out). `agent` execution needs agent pools, which this service does not have: refused, as
 * workspaces refuse it.
 */
export const organizationSettings = {
  'default-execution-mode': z
    .enum(EXECUTION_MODES, { message: 'must be "remote" or "local" (agent execution is not available: there are no agent pools)' })
    .optional(),
  'allow-force-delete-workspaces': flexibleBoolean.optional(),
  'assessments-enforced': flexibleBoolean.optional(),
  'collaborator-auth-policy': z.enum(COLLABORATOR_AUTH_POLICIES, { message: 'must be "password" or "two_factor_mandatory"' }).optional(),
  'cost-estimation-enabled': flexibleBoolean.optional(),
  'send-passing-statuses-for-untriggered-speculative-plans': flexibleBoolean.optional(),
  'aggregated-commit-status-enabled': flexibleBoolean.optional(),
  'speculative-plan-management-enabled': flexibleBoolean.optional(),
  'owners-team-saml-role-id': safeText(255).nullable().optional(),
  'session-remember': minutes.optional(),
  'session-timeout': minutes.optional(),
  'stacks-enabled': flexibleBoolean.optional(),
  'registry-monorepo-support-enabled': flexibleBoolean.optional(),
  // Single sign-on (docs/sso.md): which values of the teams claim stand for which team; null: team names match.
  'sso-team-mapping': z
    .record(safeText(255).min(1, 'a claim value must not be empty'), safeText(255).min(1, 'must name a team'))
    .refine((mapping) => Object.keys(mapping).length <= 100, 'must map at most 100 claim values')
    .nullable()
    .optional(),
};

export type OrganizationSettingsInput = z.output<z.ZodObject<typeof organizationSettings>>;

/** Attribute name → entity property, for the plain copies. */
const PROPERTIES = {
  'default-execution-mode': 'defaultExecutionMode',
  'allow-force-delete-workspaces': 'allowForceDeleteWorkspaces',
  'assessments-enforced': 'assessmentsEnforced',
  'collaborator-auth-policy': 'collaboratorAuthPolicy',
  'cost-estimation-enabled': 'costEstimationEnabled',
  'send-passing-statuses-for-untriggered-speculative-plans': 'sendPassingStatusesForUntriggeredSpeculativePlans',
  'aggregated-commit-status-enabled': 'aggregatedCommitStatusEnabled',
  'speculative-plan-management-enabled': 'speculativePlanManagementEnabled',
  'owners-team-saml-role-id': 'ownersTeamSamlRoleId',
  'session-remember': 'sessionRemember',
  'session-timeout': 'sessionTimeout',
  'stacks-enabled': 'stacksEnabled',
  'registry-monorepo-support-enabled': 'registryMonorepoSupportEnabled',
  'sso-team-mapping': 'ssoTeamMapping',
} as const satisfies Record<keyof OrganizationSettingsInput, keyof Organization>;

/** Copies every setting the request gives onto the organization; the rest keep their values. */
export function applyOrganizationSettings(organization: Organization, input: OrganizationSettingsInput): void {
  for (const [attribute, property] of Object.entries(PROPERTIES) as [keyof OrganizationSettingsInput, keyof Organization][]) {
    const value = input[attribute];
    // Each value was validated by its attribute's schema, whose output is the property's type.
    if (value !== undefined) Object.assign(organization, { [property]: value });
  }
}

/** The settings as HCP returns them, with the read-only attributes go-tfe reads. */
export function organizationSettingsAttributes(organization: Organization): Record<string, unknown> {
  const attributes: Record<string, unknown> = {};
  // A nullable column of a just-created entity is undefined until reloaded: shown as null.
  for (const [attribute, property] of Object.entries(PROPERTIES)) attributes[attribute] = organization[property] ?? null;
  return {
    ...attributes,
    // No SAML, no two-factor sign-in, no trials, no registry tests here: HCP's values for an organization without them.
    'saml-enabled': false,
    'two-factor-conformant': true,
    'trial-expires-at': null,
    'remaining-testable-count': 0,
    'is-unified': false,
  };
}
