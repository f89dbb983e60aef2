import { defineEntity, p } from '@mikro-orm/core';
import type { RunStage, TaskStageStatus } from '../../domain/statuses.ts';
import { Run } from './run.entity.ts';

const TaskStageSchema = defineEntity({
  name: 'TaskStage',
  tableName: 'task_stages',
  // Exactly one stage per run stage, whoever plans it and however often (docs/design.md, "Exactly once by constraint").
  uniques: [{ name: 'task_stages_run_stage_unique', properties: ['run', 'stage'] }],
  properties: {
    id: p.string().length(32).primary(),
    run: () => p.manyToOne(Run).deleteRule('cascade'),
    // Checked by a domain, which the ORM's schema comparison does not see (Migration20261125000000StatusDomains).
    stage: p.text().$type<RunStage>(),
    status: p.text().$type<TaskStageStatus>().default('pending'),
    statusTimestamps: p
      .json<Record<string, string>>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
    // Results not yet final, kept by the task_results trigger (see TaskResult): a stage's last verdict
    // reads it on one row instead of locking every sibling result.
    openResults: p.integer().default(0),
    version: p.integer().version(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class TaskStage extends TaskStageSchema.class {}
TaskStageSchema.setClass(TaskStage);
