import { defineEntity, p } from '@mikro-orm/core';
import type { RunOptions } from '../../domain/run-options.ts';
import type { QueueState } from '../../domain/run-queue.ts';
import type { ExecutionMode, RunStatus } from '../../domain/statuses.ts';
import { Organization } from './organization.entity.ts';
import { Workspace } from './workspace.entity.ts';

const RunSchema = defineEntity({
  name: 'Run',
  tableName: 'runs',
  indexes: [
    { name: 'runs_workspace_created_idx', properties: ['workspace', 'createdAt'] },
    // Whether a configuration version is in use (its upload and archive actions ask): no scan of every run.
    { name: 'runs_configuration_version_idx', properties: ['configurationVersionId'] },
    // The sweeper's (shared/src/engine/sweeper.ts, IDLE_RUNS_SQL): its predicate is that query's.
    {
      name: 'runs_unfinished_idx',
      expression: `create index "runs_unfinished_idx" on "runs" ("updated_at") where "status" not in ('applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled')`,
    },
    // The workspace run queue (shared/src/domain/run-queue.ts): at most one holder per workspace, and the waiting runs in order.
    {
      name: 'runs_workspace_holder_idx',
      expression: `create unique index "runs_workspace_holder_idx" on "runs" ("workspace_id") where "queue_state" = 'holding' and "status" not in ('applied', 'post_apply_running', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled')`,
    },
    {
      name: 'runs_workspace_queued_idx',
      expression: `create index "runs_workspace_queued_idx" on "runs" ("workspace_id", "created_at", "id") where "queue_state" = 'queued' and "status" = 'pending'`,
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
    // `queued` while the run waits for its workspace, `holding` once admitted; null outside the queue (plan-only, or older runs).
    queueState: p.text().$type<QueueState>().nullable(),
    // Who created the run and who confirmed (applied) it: the acting principal's user id (api's auth/actor.ts).
    createdBy: p.text().nullable(),
    confirmedBy: p.text().nullable(),
    // HCP's creation attributes the engine does not read (refresh, target-addrs, variables, ...): run-options.ts.
    options: p
      .json<RunOptions>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
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
