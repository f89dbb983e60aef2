/** The workspace document the tests send. */

export const workspaceDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'workspaces', attributes } });
