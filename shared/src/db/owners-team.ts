import type { EntityManager } from '@mikro-orm/core';
import { newId } from '../domain/ids.ts';
import type { Organization } from './entities/organization.entity.ts';
import { Team } from './entities/team.entity.ts';

/** The name of every organization's owners team, as in HCP: it cannot change. */
export const OWNERS_TEAM_NAME = 'owners';

/**
 * Persists (on the next flush) the owners team of a new organization: every organization-level right,
 * and its token acts with owner rights. Whoever creates an organization creates this with it.
 */
export function createOwnersTeam(em: EntityManager, organization: Organization): Team {
  return em.create(Team, {
    id: newId('team'),
    organization,
    name: OWNERS_TEAM_NAME,
    isOwners: true,
    manageRunTasks: true,
    manageWorkspaces: true,
    managePolicyOverrides: true,
  });
}
