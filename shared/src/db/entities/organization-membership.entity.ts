import { defineEntity, p } from '@mikro-orm/core';
import { MEMBERSHIP_STATUSES } from '../../domain/statuses.ts';
import { PRINCIPALS_NOTIFY } from '../principals-notify.ts';
import { Organization } from './organization.entity.ts';
import { Team } from './team.entity.ts';
import { User } from './user.entity.ts';

/**
 * A user's membership of an organization (HCP's `organization-memberships`, ids `ou-…`): made by an
 * invitation, accepted by its user, removed by its deletion. A user token reaches the organizations
 * where its user's membership is accepted (`active`), with the union of the rights of the member's teams there (docs/design.md, "People").
 */
/**
 * NOTIFYs on every insert and delete: one trigger each (MikroORM compares triggers event by event), named
 * short enough that its function's name (`<table>_<trigger>_fn`) fits PostgreSQL's 63 characters.
 */
const principalTriggers = () =>
  (['insert', 'delete'] as const).map((event) => ({
    name: `member_principal_${event}`,
    timing: 'after' as const,
    events: [event],
    forEach: 'statement' as const,
    body: PRINCIPALS_NOTIFY,
  }));

const OrganizationMembershipSchema = defineEntity({
  name: 'OrganizationMembership',
  tableName: 'organization_memberships',
  // A user token's principal is its user's active memberships and teams: adding, removing or accepting one tells API processes to forget it.
  triggers: [
    ...principalTriggers(),
    {
      name: 'member_principal_update',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      when: '(old.status <> new.status)',
      body: PRINCIPALS_NOTIFY,
    },
  ],
  uniques: [{ name: 'organization_memberships_organization_user_unique', properties: ['organization', 'user'] }],
  indexes: [{ name: 'organization_memberships_user_idx', properties: ['user'] }],
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    user: () => p.manyToOne(User).deleteRule('cascade'),
    status: p.enum(MEMBERSHIP_STATUSES).default('invited'),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class OrganizationMembership extends OrganizationMembershipSchema.class {}
OrganizationMembershipSchema.setClass(OrganizationMembership);

/**
 * A member on a team (HCP's team membership), by organization membership: removing the member from
 * the organization removes them from its teams. A team and a membership are of one organization (the
 * service checks it on adding).
 */
const TeamMembershipSchema = defineEntity({
  name: 'TeamMembership',
  tableName: 'team_memberships',
  triggers: principalTriggers(),
  indexes: [{ name: 'team_memberships_membership_idx', properties: ['membership'] }],
  properties: {
    team: () => p.manyToOne(Team).primary().deleteRule('cascade'),
    membership: () => p.manyToOne(OrganizationMembership).primary().deleteRule('cascade'),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class TeamMembership extends TeamMembershipSchema.class {}
TeamMembershipSchema.setClass(TeamMembership);
