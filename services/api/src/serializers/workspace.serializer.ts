import type { Workspace } from '@runtasks/shared/db';
import { lockedBy, type LockState } from '@runtasks/shared/domain';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';

/**
 * `permissions` are the caller's (left out in included resources); `lock`, where known, gives `locked`
 * and `locked-by` (a person's lock, or the run holding the workspace).
 */
export function serializeWorkspace(workspace: Workspace, organizationName: string, permissions?: Permissions, lock?: LockState): Resource {
  const holder = lock && lockedBy(lock);
  return {
    id: workspace.id,
    type: 'workspaces',
    attributes: {
      name: workspace.name,
      description: workspace.description ?? null,
      'auto-apply': workspace.autoApply,
      'working-directory': workspace.workingDirectory,
      'terraform-version': workspace.terraformVersion,
      'execution-mode': workspace.executionMode,
      'created-at': timestamp(workspace.createdAt),
      'updated-at': timestamp(workspace.updatedAt),
      ...(permissions && { permissions }),
      ...(lock && { locked: holder !== null }),
    },
    relationships: {
      organization: toOne('organizations', organizationName),
      ...(lock && { 'locked-by': toOne(holder?.type ?? 'runs', holder?.id ?? null) }),
    },
    links: selfLink(`/organizations/${organizationName}/workspaces/${workspace.name}`),
  };
}
