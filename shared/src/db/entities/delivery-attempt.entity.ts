import { defineEntity, p } from '@mikro-orm/core';
import { TaskResult } from './task-result.entity.ts';

/** One row per outbound POST to a task server: what was tried, when, and what came back. */
const DeliveryAttemptSchema = defineEntity({
  name: 'DeliveryAttempt',
  tableName: 'delivery_attempts',
  uniques: [{ name: 'delivery_attempts_result_attempt_unique', properties: ['taskResult', 'attempt'] }],
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    taskResult: () => p.manyToOne(TaskResult).deleteRule('cascade'),
    attempt: p.integer(),
    startedAt: p.datetime(),
    durationMs: p.integer(),
    httpStatus: p.integer().nullable(),
    errorKind: p.string().length(64).nullable(),
    responseExcerpt: p.text().nullable(),
  },
});

export class DeliveryAttempt extends DeliveryAttemptSchema.class {}
DeliveryAttemptSchema.setClass(DeliveryAttempt);
