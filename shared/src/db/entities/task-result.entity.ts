import { defineEntity, p } from '@mikro-orm/core';
import type { EnforcementLevel, RunStage, TaskResultStatus } from '../../domain/statuses.ts';
import { STAGE_OPEN_COUNT_TRIGGER_BODY } from '../../engine/stage-count-trigger.ts';
import { TOKEN_CREATED_NOTIFY } from '../principals-notify.ts';
import { TaskStage } from './task-stage.entity.ts';

const TaskResultSchema = defineEntity({
  name: 'TaskResult',
  tableName: 'task_results',
  uniques: [
    // One result per task per stage; a task attached to the workspace and also global counts once.
    { name: 'task_results_stage_task_unique', properties: ['taskStage', 'taskId'] },
  ],
  indexes: [
    // Only results planned before access tokens were derived store one (Migration20261130500000DerivedAccessTokens).
    {
      name: 'task_results_callback_token_hash_stored',
      expression: `create unique index "task_results_callback_token_hash_stored" on "task_results" ("callback_token_hash") where "callback_token_hash" is not null`,
    },
  ],
  checks: [
    {
      // Both deadlines are set when a result starts, and callbacks move only the progress deadline: one
      // with a hard deadline has a progress deadline. As PostgreSQL prints it back.
      name: 'task_results_deadlines_check',
      expression: '((hard_deadline IS NULL) OR (progress_deadline IS NOT NULL))',
    },
  ],
  triggers: [
    {
      // Keeps each stage's count of open results, and wakes the run a verdict's stage closes (STAGE_OPEN_COUNT_TRIGGER_BODY).
      name: 'task_results_stage_open_count',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      // As PostgreSQL prints it back (the schema comparison is textual): the result leaves pending/running.
      when: `(((old.status)::text = ANY (ARRAY['pending'::text, 'running'::text])) AND ((new.status)::text <> ALL (ARRAY['pending'::text, 'running'::text])))`,
      body: STAGE_OPEN_COUNT_TRIGGER_BODY,
    },
    // A stored access token (written only by versions before derived tokens) joins the API processes' set
    // of active tokens' hashes, as a new API token does (Migration20261130500001StoredTaskTokenNotify).
    {
      name: 'task_results_stored_token_insert',
      timing: 'after',
      events: ['insert'],
      forEach: 'row',
      when: '(new.callback_token_hash IS NOT NULL)',
      body: TOKEN_CREATED_NOTIFY,
    },
    {
      name: 'task_results_stored_token_update',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      when: '((new.callback_token_hash IS NOT NULL) AND ((old.callback_token_hash)::text IS DISTINCT FROM (new.callback_token_hash)::text))',
      body: TOKEN_CREATED_NOTIFY,
    },
  ],
  properties: {
    id: p.string().length(32).primary(),
    taskStage: () => p.manyToOne(TaskStage).deleteRule('cascade'),
    // Snapshot, not foreign keys: deleting a task keeps the results already created, and they finish.
    taskId: p.string().length(32),
    workspaceTaskId: p.string().length(32).nullable(),
    taskName: p.string().length(255),
    taskUrl: p.text(),
    hmacKeyEncrypted: p.text().nullable(),
    // Checked by a domain, which the ORM's schema comparison does not see (Migration20261125000000StatusDomains).
    enforcementLevel: p.text().$type<EnforcementLevel>(),
    stage: p.text().$type<RunStage>(),
    isSpeculative: p.boolean().default(false),
    status: p.text().$type<TaskResultStatus>().default('pending'),
    statusTimestamps: p
      .json<Record<string, string>>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
    message: p.text().nullable(),
    url: p.text().nullable(),
    // The access token of a result planned before tokens were derived from its id (issue 47): hashed for
    // lookup, encrypted so a re-dispatch carries the same token. Null for every result planned since.
    callbackTokenHash: p.string().length(64).nullable(),
    callbackTokenEncrypted: p.text().nullable(),
    acknowledgedAt: p.datetime().nullable(),
    nextAttemptAt: p.datetime().nullable(),
    progressDeadline: p.datetime().nullable(),
    hardDeadline: p.datetime().nullable(),
    attempts: p.integer().default(0),
    outcomesCount: p.integer().default(0),
    // Bytes of the outcome bodies, capped with the count (OUTCOME_LIMITS) by the callback that adds them.
    outcomesBytes: p.integer().default(0),
    version: p.integer().version(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class TaskResult extends TaskResultSchema.class {}
TaskResultSchema.setClass(TaskResult);
