import { defineEntity, p } from '@mikro-orm/core';
import { EDITIONS } from '../../domain/editions.ts';

const OrganizationSchema = defineEntity({
  name: 'Organization',
  tableName: 'organizations',
  properties: {
    id: p.string().length(32).primary(),
    name: p.string().length(40).unique(),
    email: p.text(),
    edition: p.enum(EDITIONS).default('standard'),
    // Off by default: HCP's documented rule is that a failed mandatory task stops the run.
    taskOverridesEnabled: p.boolean().default(false),
    // The `global-run-tasks` entitlement (HCP's Business plan); go-tfe's tests switch it through feature sets.
    globalRunTasksEnabled: p.boolean().default(true),
    // Kept by triggers on run_tasks (never written here): the total of the task list without a count.
    runTaskCount: p.integer().default(0),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class Organization extends OrganizationSchema.class {}
OrganizationSchema.setClass(Organization);
