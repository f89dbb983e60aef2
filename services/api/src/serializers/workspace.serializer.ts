import type { Workspace } from '@runtasks/shared/db';
import type { Permissions } from '../auth/permissions.ts';
import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';

/** `permissions` are the caller's (left out in included resources). */
export function serializeWorkspace(workspace: Workspace, organizationName: string, permissions?: Permissions): Resource {
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
    },
    relationships: { organization: toOne('organizations', organizationName) },
    links: selfLink(`/organizations/${organizationName}/workspaces/${workspace.name}`),
  };
}
