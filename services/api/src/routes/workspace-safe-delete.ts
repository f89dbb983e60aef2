import type { ApiContext } from '../context.ts';
import type { RouteDef } from './define.ts';

/**
 * HCP's safe delete refuses a workspace whose state still manages resources. Workspaces here have no
 * state versions, so none manages a resource, and a safe delete deletes as a delete does (same scope,
 * same 204). The routes exist so that clients which always use safe delete (go-tfe's `SafeDelete`,
 * the Terraform provider's `force_delete = false`) work.
 */
export function safeDeleteRoutes(byName: (ctx: ApiContext) => Promise<void>, byId: (ctx: ApiContext) => Promise<void>): RouteDef[] {
  const notes = 'No workspace here manages resources (there are no state versions), so a safe delete always deletes.';
  return [
    {
      method: 'POST',
      path: '/organizations/:organization_name/workspaces/:workspace_name/actions/safe-delete',
      auth: 'token',
      summary: 'Safe-delete a workspace by name',
      notes,
      response: { status: 204, content: 'none' },
      handler: byName,
    },
    {
      method: 'POST',
      path: '/workspaces/:workspace_id/actions/safe-delete',
      auth: 'token',
      summary: 'Safe-delete a workspace',
      notes,
      response: { status: 204, content: 'none' },
      handler: byId,
    },
  ];
}
