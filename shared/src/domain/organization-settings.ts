/** HCP's collaborator authentication policies. */
export const COLLABORATOR_AUTH_POLICIES = ['password', 'two_factor_mandatory'] as const;
export type CollaboratorAuthPolicy = (typeof COLLABORATOR_AUTH_POLICIES)[number];

/** HCP's session defaults, in minutes (two weeks). */
export const DEFAULT_SESSION_MINUTES = 20160;

/** Terraform Enterprise's default build worker timeouts. */
export const DEFAULT_APPLY_TIMEOUT = '24h';
export const DEFAULT_PLAN_TIMEOUT = '2h';

const DURATION = /^(?:\d+h)?(?:\d+m)?(?:\d+s)?$/;

/** A Go duration in hours, minutes and seconds (`24h`, `1h30m`), as Terraform Enterprise takes them. */
export const isWorkerTimeout = (value: string): boolean => value.length > 0 && value.length <= 20 && DURATION.test(value);

/** The team organization-access keys HCP has, in its order. */
export const ORGANIZATION_ACCESS_KEYS = [
  'manage-policies',
  'manage-policy-overrides',
  'manage-workspaces',
  'manage-vcs-settings',
  'manage-providers',
  'manage-modules',
  'manage-run-tasks',
  'manage-projects',
  'read-workspaces',
  'read-projects',
  'manage-membership',
  'manage-teams',
  'manage-organization-access',
  'access-secret-teams',
  'manage-agent-pools',
] as const;
export type OrganizationAccessKey = (typeof ORGANIZATION_ACCESS_KEYS)[number];
export type OrganizationAccess = Record<OrganizationAccessKey, boolean>;

/** HCP's dependencies between organization-access keys: the key needs every key listed. */
const REQUIRES: Partial<Record<OrganizationAccessKey, OrganizationAccessKey[]>> = {
  'manage-teams': ['manage-membership'],
  'manage-organization-access': ['manage-membership', 'manage-teams'],
};

/**
 * The first organization-access key that is on without a key it needs, with what it needs; HCP refuses
 * such a team (a team that manages teams must manage membership, and so on).
 */
export function missingAccessDependency(
  access: OrganizationAccess,
): { key: OrganizationAccessKey; needs: OrganizationAccessKey } | undefined {
  for (const key of ORGANIZATION_ACCESS_KEYS) {
    if (!access[key]) continue;
    const needs = REQUIRES[key]?.find((required) => !access[required]);
    if (needs) return { key, needs };
  }
  return undefined;
}
