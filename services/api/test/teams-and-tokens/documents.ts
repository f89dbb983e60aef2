import { API_TOKEN_PREFIX } from '@runtasks/shared/security';
import { ORGANIZATION_ACCESS_KEYS } from '@runtasks/shared/domain';

/** Team and team access documents, and the shapes tokens and access are checked against. */

export const TOKEN_SHAPE = new RegExp(`^${API_TOKEN_PREFIX}[A-Za-z0-9_-]{43}$`);

/** Every organization-access key HCP has, off; tests spread the keys they turn on over it. */
export const NO_ACCESS = Object.fromEntries(ORGANIZATION_ACCESS_KEYS.map((key) => [key, false]));

export const teamDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'teams', attributes } });

export function teamWorkspaceDocument(teamId: string, workspaceId: string, attributes: Record<string, unknown> = {}) {
  return {
    data: {
      type: 'team-workspaces',
      attributes,
      relationships: { team: { data: { type: 'teams', id: teamId } }, workspace: { data: { type: 'workspaces', id: workspaceId } } },
    },
  };
}

export function teamWorkspaceDocumentFor(attributes: Record<string, unknown>) {
  return teamWorkspaceDocument('team-placeholder', 'ws-placeholder', attributes);
}
