import { defineEntity, p } from '@mikro-orm/core';
import { TaskResult } from './task-result.entity.ts';

const TaskResultOutcomeSchema = defineEntity({
  name: 'TaskResultOutcome',
  tableName: 'task_result_outcomes',
  indexes: [{ name: 'task_result_outcomes_result_idx', properties: ['taskResult'] }],
  properties: {
    id: p.string().length(32).primary(),
    taskResult: () => p.manyToOne(TaskResult).deleteRule('cascade'),
    outcomeId: p.string().length(255),
    description: p.text().nullable(),
    body: p.text().nullable(),
    url: p.text().nullable(),
    tags: p
      .json<Record<string, unknown>>()
      .defaultRaw(`'{}'`)
      .onCreate(() => ({})),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class TaskResultOutcome extends TaskResultOutcomeSchema.class {}
TaskResultOutcomeSchema.setClass(TaskResultOutcome);
