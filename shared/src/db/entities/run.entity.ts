import { defineEntity, p } from '@mikro-orm/core';
import type { RunOptions } from '../../domain/run-options.ts';
import { RELEASED_RUN_STATUSES, type QueueState } from '../../domain/run-queue.ts';
import { FINAL_RUN_STATUSES, type ExecutionMode, type RunStatus } from '../../domain/statuses.ts';
import { RUN_NOTIFY_STATUS_WHEN, RUN_NOTIFY_TRIGGER_BODY } from '../../engine/notification-trigger.ts';
import { Organization } from './organization.entity.ts';
import { Workspace } from './workspace.entity.ts';
import { StoredObject } from './stored-object.entity.ts';

// `<> all (array[…])` is how PostgreSQL stores `not in (…)`, and how the ORM's schema comparison reads it back.
const notAnyOf = (statuses: ReadonlySet<RunStatus>): string => `<> all (array[${[...statuses].map((status) => `'${status}'`).join(', ')}])`;

/*
 * Where a run stands for the sweeper and the queue, as stored generated columns. Their indexes are partial
 * on these columns rather than on `status`: PostgreSQL makes an update HOT (no new index entries) only
 * where no indexed column changes, a predicate's included, and a generated column's value stays the same
 * through every status change but the one that crosses its line. So a run's status changes in flight
 * write no index entries; only its admission and its end do (Migration20261204000000RunsHotStatus).
 */
const UNFINISHED_SQL = `"status" ${notAnyOf(FINAL_RUN_STATUSES)}`;
const HOLDS_WORKSPACE_SQL = `"queue_state" = 'holding' and "status" ${notAnyOf(RELEASED_RUN_STATUSES)}`;
const WAITS_IN_QUEUE_SQL = `"queue_state" = 'queued' and "status" = 'pending'`;

const RunSchema = defineEntity({
  name: 'Run',
  tableName: 'runs',
  // A run's creation and status changes, recorded for the workspace's notifications when it has any (RUN_NOTIFY_TRIGGER_BODY).
  triggers: [
    { name: 'runs_notify_created', timing: 'after', events: ['insert'], forEach: 'row', body: RUN_NOTIFY_TRIGGER_BODY },
    {
      name: 'runs_notify_status',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      // The status changed to one that may give a notice.
      when: RUN_NOTIFY_STATUS_WHEN,
      body: RUN_NOTIFY_TRIGGER_BODY,
    },
  ],
  indexes: [
    { name: 'runs_workspace_created_idx', properties: ['workspace', 'createdAt'] },
    // An organization's runs, newest first (GET /organizations/:org/runs).
    { name: 'runs_organization_created_idx', properties: ['organization', 'createdAt'] },
    // Whether a configuration version is in use (its upload and archive actions ask): no scan of every run.
    // Partial: most runs have none, and their status changes, never HOT, then write no entry here (Migration20261130500002RunsNullableIndexes).
    {
      name: 'runs_configuration_version_idx',
      expression: `create index "runs_configuration_version_idx" on "runs" ("configuration_version_id") where "configuration_version_id" is not null`,
    },
    // The plan JSON's stored object (retention, and the foreign key's `set null`); partial for the same reason.
    {
      name: 'runs_plan_object_idx',
      expression: `create index "runs_plan_object_idx" on "runs" ("plan_object_key") where "plan_object_key" is not null`,
    },
    // The sweeper's (shared/src/engine/runs.sql.ts): the unfinished runs in creation order. Not by
    // `updated_at`, which every status change moves.
    {
      name: 'runs_unfinished_idx',
      expression: `create index "runs_unfinished_idx" on "runs" ("created_at", "id") where "unfinished"`,
    },
    // The workspace run queue (shared/src/domain/run-queue.ts): at most one holder per workspace, and the waiting runs in order.
    {
      name: 'runs_workspace_holder_idx',
      expression: `create unique index "runs_workspace_holder_idx" on "runs" ("workspace_id") where "holds_workspace"`,
    },
    // A retried `POST /runs` with its Idempotency-Key finds its run (services/api/src/routes/runs.routes.ts).
    {
      name: 'runs_workspace_idempotency_key_idx',
      expression: `create unique index "runs_workspace_idempotency_key_idx" on "runs" ("workspace_id", "idempotency_key") where "idempotency_key" is not null`,
    },
    {
      name: 'runs_workspace_queued_idx',
      expression: `create index "runs_workspace_queued_idx" on "runs" ("workspace_id", "created_at", "id") where "waits_in_queue"`,
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
    // SHA-256 (hex) of the plan JSON a pipeline reported and of its binary plan file, where given: what
    // a repeated report and an apply are compared with (shared/src/domain/report-decision.ts).
    planJsonSha256: p.text().nullable(),
    planFileSha256: p.text().nullable(),
    // The Idempotency-Key of the `POST /runs` that created the run, and a fingerprint of that request's body.
    idempotencyKey: p.text().nullable(),
    idempotencyFingerprint: p.text().nullable(),
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
    // Written by PostgreSQL alone, from `status` and `queueState` (the comment on UNFINISHED_SQL says why).
    unfinished: p.boolean().generated(`(${UNFINISHED_SQL}) stored`),
    // Null where the run is outside the queue (`queue_state` null), which no predicate takes for true.
    holdsWorkspace: p.boolean().nullable().generated(`(${HOLDS_WORKSPACE_SQL}) stored`),
    waitsInQueue: p.boolean().nullable().generated(`(${WAITS_IN_QUEUE_SQL}) stored`),
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
    // A reported plan JSON's stored object (shared/src/storage), kept as the bytes reported; null once retention removed it.
    planObject: () => p.manyToOne(StoredObject).nullable().deleteRule('set null').index(false),
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
