import { defineEntity, p } from '@mikro-orm/core';
import { ENFORCEMENT_LEVELS } from '../../domain/statuses.ts';
import { Organization } from './organization.entity.ts';

const RunTaskSchema = defineEntity({
  name: 'RunTask',
  tableName: 'run_tasks',
  uniques: [{ name: 'run_tasks_organization_name_unique', properties: ['organization', 'name'] }],
  // The list order of GET /organizations/:org/tasks (created_at, id).
  indexes: [{ name: 'run_tasks_organization_created_idx', properties: ['organization', 'createdAt', 'id'] }],
  // Keep organizations.run_task_count exact whoever inserts or deletes tasks (see that column).
  triggers: [
    {
      name: 'run_tasks_count_insert',
      timing: 'after',
      events: ['insert'],
      forEach: 'row',
      body: 'update organizations set run_task_count = run_task_count + 1 where id = new.organization_id; return null;',
    },
    {
      name: 'run_tasks_count_delete',
      timing: 'after',
      events: ['delete'],
      forEach: 'row',
      body: 'update organizations set run_task_count = run_task_count - 1 where id = old.organization_id; return null;',
    },
  ],
  properties: {
    id: p.string().length(32).primary(),
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    name: p.string().length(255),
    url: p.text(),
    description: p.text().nullable(),
    category: p.string().length(32).default('task'),
    // AES-256-GCM envelope (never the key itself); null means "no key" and signatures are empty strings.
    hmacKeyEncrypted: p.text().nullable(),
    enabled: p.boolean().default(true),
    globalEnabled: p.boolean().default(false),
    globalStages: p.array().default([]),
    globalEnforcementLevel: p.enum(ENFORCEMENT_LEVELS).default('advisory'),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class RunTask extends RunTaskSchema.class {}
RunTaskSchema.setClass(RunTask);
