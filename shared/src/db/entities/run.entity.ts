import { defineEntity, p } from '@mikro-orm/core';
import type { ExecutionMode, RunStatus } from '../../domain/statuses.ts';
import { Organization } from './organization.entity.ts';
import { Workspace } from './workspace.entity.ts';

const RunSchema = defineEntity({
  name: 'Run',
  tableName: 'runs',
  indexes: [
    { name: 'runs_workspace_created_idx', properties: ['workspace', 'createdAt'] },
    // The sweeper's (shared/src/engine/sweeper.ts, IDLE_RUNS_SQL): its predicate is that query's.
    {
      name: 'runs_unfinished_idx',
      expression: `create index "runs_unfinished_idx" on "runs" ("updated_at") where "status" not in ('applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled')`,
    },
  ],
  properties: {
    id: p.string().length(32).primary(),
    // Denormalised so every query can be organization-scoped without a join.
    organization: () => p.manyToOne(Organization).deleteRule('cascade'),
    workspace: () => p.manyToOne(Workspace).deleteRule('cascade'),
    planId: p.string().length(32).unique(),
    applyId: p.string().length(32).unique(),
    // The workspace's execution mode when the run was created: a mode changed later leaves the run as it began.
    executionMode: p.text().$type<ExecutionMode>().default('remote'),
    // What the plan changes (a local run's reported plan, or a run's plan-json): counted as HCP counts a plan.
    hasChanges: p.boolean().default(false),
    resourceAdditions: p.integer().default(0),
    resourceChanges: p.integer().default(0),
    resourceDestructions: p.integer().default(0),
    resourceImports: p.integer().default(0),
    // Why the plan or apply errored: the pipeline's message, or the local execution timeout's.
    executionError: p.text().nullable(),
    // Checked by a domain, which the ORM's schema comparison does not see (Migration20261125000000StatusDomains).
    status: p.text().$type<RunStatus>().default('pending'),
    statusTimestamps: p
      .json<Record<string, string>>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
    message: p.text().default(''),
    isDestroy: p.boolean().default(false),
    planOnly: p.boolean().default(false),
    autoApply: p.boolean().default(false),
    hasTaskWarnings: p.boolean().default(false),
    // Set when the run's task stages are planned (at its creation): a pending run without stages and
    // without this flag was created by an earlier version, and its first advance plans it (shared/src/engine/advance-run.ts).
    stagesPlanned: p.boolean().default(false),
    createdBy: p.text().nullable(),
    configurationVersionId: p.string().length(32).nullable(),
    planJson: p.json<unknown>().nullable().lazy(),
    version: p.integer().version(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class Run extends RunSchema.class {}
RunSchema.setClass(Run);
