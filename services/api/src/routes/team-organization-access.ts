import { invalidAttribute } from '@runtasks/shared/errors';
import {
  missingAccessDependency,
  ORGANIZATION_ACCESS_KEYS,
  type OrganizationAccess,
  type OrganizationAccessKey,
} from '@runtasks/shared/domain';
import { type Team } from '@runtasks/shared/db';
import { z } from 'zod';
import { flexibleBoolean } from './schemas.ts';

/** The stored keys, by team property. `read-workspaces` is not among them: it follows `manage-workspaces`. */
const PROPERTIES = {
  'manage-policies': 'managePolicies',
  'manage-policy-overrides': 'managePolicyOverrides',
  'manage-workspaces': 'manageWorkspaces',
  'manage-vcs-settings': 'manageVcsSettings',
  'manage-providers': 'manageProviders',
  'manage-modules': 'manageModules',
  'manage-run-tasks': 'manageRunTasks',
  'manage-projects': 'manageProjects',
  'read-projects': 'readProjects',
  'manage-membership': 'manageMembership',
  'manage-teams': 'manageTeams',
  'manage-organization-access': 'manageOrganizationAccess',
  'access-secret-teams': 'accessSecretTeams',
  'manage-agent-pools': 'manageAgentPools',
} as const satisfies Record<Exclude<OrganizationAccessKey, 'read-workspaces'>, keyof Team>;

type StoredKey = keyof typeof PROPERTIES;

/** HCP's `organization-access` object: every key optional; unknown keys are ignored, as elsewhere. */
export const organizationAccessSchema = z
  .object(
    Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, flexibleBoolean.optional()])) as Record<
      OrganizationAccessKey,
      z.ZodOptional<typeof flexibleBoolean>
    >,
  )
  .optional();

export type OrganizationAccessInput = z.output<typeof organizationAccessSchema>;

/** The team's organization access as HCP shows it: the owners team holds every key. */
export function organizationAccessOf(team: Team): OrganizationAccess {
  const access = Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, team.isOwners])) as OrganizationAccess;
  if (team.isOwners) return access;
  for (const [key, property] of Object.entries(PROPERTIES) as [StoredKey, keyof typeof Team.prototype][])
    access[key] = team[property] === true;
  // Managing every workspace includes reading every one; reading them alone is not a right this service has.
  access['read-workspaces'] = team.manageWorkspaces;
  return access;
}

/**
 * Applies the keys the request gives. Refused (422 at the key, nothing changed): `read-workspaces` on
 * without `manage-workspaces` (a team reads the workspaces it has access to; reading all of them
 * without managing them is not available), and a key on without one HCP says it needs.
 */
export function applyOrganizationAccess(team: Team, input: OrganizationAccessInput): void {
  if (!input) return;
  const next = { ...organizationAccessOf(team) };
  for (const key of ORGANIZATION_ACCESS_KEYS) {
    const value = input[key];
    if (value !== undefined) next[key] = value;
  }
  if (input['read-workspaces'] === true && !next['manage-workspaces'])
    throw invalidAttribute(
      '/data/attributes/organization-access/read-workspaces',
      'Reading every workspace is available only with manage-workspaces; give the team access to each workspace instead.',
    );
  next['read-workspaces'] = next['manage-workspaces'];
  const missing = missingAccessDependency(next);
  if (missing) throw invalidAttribute(`/data/attributes/organization-access/${missing.key}`, `${missing.key} requires ${missing.needs}.`);
  if (team.isOwners) return;
  for (const [key, property] of Object.entries(PROPERTIES) as [StoredKey, string][]) Object.assign(team, { [property]: next[key] });
}
