import { organizationsWhere, type Principal } from './principal.ts';
import { inOrganizations, type ScopeFilter } from './scopes.ts';

/** "Manage run tasks" (organization level): owners, and teams granted it (a member of any such team). */
export function runTaskScope(principal: Principal): ScopeFilter | null {
  return inOrganizations(
    organizationsWhere(principal, (rights) => rights.owner || rights.manageRunTasks),
    'organization',
  );
}
