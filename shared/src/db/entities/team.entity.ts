import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from './organization.entity.ts';

const TeamSchema = defineEntity({
  name: 'Team',
  tableName: 'teams',
  uniques: [{ name: 'teams_organization_name_unique', properties: ['organization', 'name'] }],
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    name: p.string().length(255),
    manageRunTasks: p.boolean().default(false),
    manageWorkspaces: p.boolean().default(false),
    managePolicyOverrides: p.boolean().default(false),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class Team extends TeamSchema.class {}
TeamSchema.setClass(Team);
