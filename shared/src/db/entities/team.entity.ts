import { defineEntity, p } from '@mikro-orm/core';
import { TEAM_VISIBILITIES } from '../../domain/statuses.ts';
import { PRINCIPALS_NOTIFY } from '../principals-notify.ts';
import { Organization } from './organization.entity.ts';

const TeamSchema = defineEntity({
  name: 'Team',
  tableName: 'teams',
  // A team token's principal carries the team's organization and permissions (see ApiToken's triggers).
  triggers: [
    {
      name: 'teams_principal_update',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      when: '(((old.organization_id)::text <> (new.organization_id)::text) OR (old.manage_run_tasks <> new.manage_run_tasks) OR (old.manage_workspaces <> new.manage_workspaces) OR (old.manage_policy_overrides <> new.manage_policy_overrides))',
      body: PRINCIPALS_NOTIFY,
    },
    { name: 'teams_principal_delete', timing: 'after', events: ['delete'], forEach: 'statement', body: PRINCIPALS_NOTIFY },
  ],
  uniques: [{ name: 'teams_organization_name_unique', properties: ['organization', 'name'] }],
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    name: p.string().length(255),
    manageRunTasks: p.boolean().default(false),
    manageWorkspaces: p.boolean().default(false),
    managePolicyOverrides: p.boolean().default(false),
    // The other organization-access keys HCP has: stored and shown, granting nothing here (docs/go-tfe.md).
    managePolicies: p.boolean().default(false),
    manageVcsSettings: p.boolean().default(false),
    manageProviders: p.boolean().default(false),
    manageModules: p.boolean().default(false),
    manageProjects: p.boolean().default(false),
    readProjects: p.boolean().default(false),
    manageMembership: p.boolean().default(false),
    manageTeams: p.boolean().default(false),
    manageOrganizationAccess: p.boolean().default(false),
    accessSecretTeams: p.boolean().default(false),
    manageAgentPools: p.boolean().default(false),
    ssoTeamId: p.text().nullable(),
    allowMemberTokenManagement: p.boolean().default(true),
    // The organization's owners team: its token acts with owner rights; it is never renamed or deleted.
    isOwners: p.boolean().default(false),
    visibility: p.enum(TEAM_VISIBILITIES).default('secret'),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class Team extends TeamSchema.class {}
TeamSchema.setClass(Team);
