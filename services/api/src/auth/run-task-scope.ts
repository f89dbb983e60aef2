import type { Principal } from './principal.ts';
import type { ScopeFilter } from './scopes.ts';

/** "Manage run tasks" (organization level): owners, and teams granted it. */
export function runTaskScope(principal: Principal): ScopeFilter | null {
  if (principal.kind === 'admin') return {};
  if (principal.kind === 'organization' || principal.manageRunTasks) return { organization: principal.organizationId };
  return null;
}
