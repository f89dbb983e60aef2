/** Who is calling, resolved once per request from the bearer token. */
export type Principal =
  | { kind: 'admin'; tokenId: string }
  | { kind: 'organization'; tokenId: string; organizationId: string }
  | {
      kind: 'team';
      tokenId: string;
      organizationId: string;
      teamId: string;
      manageRunTasks: boolean;
      manageWorkspaces: boolean;
      managePolicyOverrides: boolean;
    };

export const isAdmin = (principal: Principal): boolean => principal.kind === 'admin';

/** Organization tokens carry owner rights on their organization, as in HCP. */
export const isOwnerOf = (principal: Principal, organizationId: string): boolean =>
  principal.kind === 'admin' || (principal.kind === 'organization' && principal.organizationId === organizationId);

/** The one organization a non-admin principal may see; undefined means "any" (site admin). */
export const scopedOrganizationId = (principal: Principal): string | undefined =>
  principal.kind === 'admin' ? undefined : principal.organizationId;
