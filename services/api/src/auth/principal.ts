/**
 * What a caller holds in one organization: owner rights (the organization token, the owners team's
 * token, a member of the owners team), the organization-level permissions, and the teams whose
 * workspace access it holds there.
 */
export interface OrganizationRights {
  owner: boolean;
  manageRunTasks: boolean;
  manageWorkspaces: boolean;
  managePolicyOverrides: boolean;
  teamIds: readonly string[];
}

/** Who is calling, resolved once per request from the bearer token (or a page session). */
export type Principal =
  /** The site admin: ADMIN_TOKEN, or a user token of a user who is a site admin (`userId`). */
  | { kind: 'admin'; tokenId: string; userId?: string }
  | { kind: 'organization'; tokenId: string; organizationId: string }
  | {
      kind: 'team';
      tokenId: string;
      organizationId: string;
      teamId: string;
      manageRunTasks: boolean;
      manageWorkspaces: boolean;
      managePolicyOverrides: boolean;
    }
  /** A person's token: the organizations they are a member of, each with the union of their teams' rights there. */
  | { kind: 'user'; tokenId: string; userId: string; organizations: ReadonlyMap<string, OrganizationRights> }
  /**
   * A pipeline that exchanged its CI identity token (docs/sso.md): it sees its organization and drives
   * the runs of one workspace, nothing else. `tokenId` is the trust rule its token was issued under.
   */
  | { kind: 'pipeline'; tokenId: string; organizationId: string; workspaceId: string };

/** What a pipeline holds in its organization: no organization permission, no team (its workspace: scopes.ts). */
const PIPELINE_RIGHTS: OrganizationRights = {
  owner: false,
  manageRunTasks: false,
  manageWorkspaces: false,
  managePolicyOverrides: false,
  teamIds: [],
};

export const OWNER_RIGHTS: OrganizationRights = {
  owner: true,
  manageRunTasks: true,
  manageWorkspaces: true,
  managePolicyOverrides: true,
  teamIds: [],
};

/** One team's contribution to a member's rights. */
export interface TeamRights {
  teamId: string;
  isOwners: boolean;
  manageRunTasks: boolean;
  manageWorkspaces: boolean;
  managePolicyOverrides: boolean;
}

/** A member's rights in an organization: the union of their teams' (the owners team makes an owner); no team, no rights but seeing it. */
export function unionOfTeams(teams: readonly TeamRights[]): OrganizationRights {
  if (teams.some((team) => team.isOwners)) return { ...OWNER_RIGHTS, teamIds: teams.map((team) => team.teamId) };
  return {
    owner: false,
    manageRunTasks: teams.some((team) => team.manageRunTasks),
    manageWorkspaces: teams.some((team) => team.manageWorkspaces),
    managePolicyOverrides: teams.some((team) => team.managePolicyOverrides),
    teamIds: teams.map((team) => team.teamId),
  };
}

/** The caller's rights in an organization, or null where it reaches nothing of it. */
export function rightsIn(principal: Principal, organizationId: string): OrganizationRights | null {
  switch (principal.kind) {
    case 'admin':
      return OWNER_RIGHTS;
    case 'organization':
      return principal.organizationId === organizationId ? OWNER_RIGHTS : null;
    case 'team':
      return principal.organizationId === organizationId
        ? {
            owner: false,
            manageRunTasks: principal.manageRunTasks,
            manageWorkspaces: principal.manageWorkspaces,
            managePolicyOverrides: principal.managePolicyOverrides,
            teamIds: [principal.teamId],
          }
        : null;
    case 'user':
      return principal.organizations.get(organizationId) ?? null;
    case 'pipeline':
      return principal.organizationId === organizationId ? PIPELINE_RIGHTS : null;
  }
}

/** Every organization the caller reaches, with its rights in each; null: every organization (the site admin). */
export function organizationRights(principal: Principal): ReadonlyMap<string, OrganizationRights> | null {
  if (principal.kind === 'admin') return null;
  if (principal.kind === 'user') return principal.organizations;
  const rights = rightsIn(principal, principal.organizationId);
  return new Map(rights ? [[principal.organizationId, rights]] : []);
}

/** The organizations where the caller's rights pass `test`; null: every organization (the site admin). */
export function organizationsWhere(principal: Principal, test: (rights: OrganizationRights) => boolean): string[] | null {
  const all = organizationRights(principal);
  return all && [...all].flatMap(([organizationId, rights]) => (test(rights) ? [organizationId] : []));
}

export const isAdmin = (principal: Principal): boolean => principal.kind === 'admin';

/** Owner rights on the organization: the site admin, its organization token, the owners team (its token or a member). */
export const isOwnerOf = (principal: Principal, organizationId: string): boolean => rightsIn(principal, organizationId)?.owner === true;
