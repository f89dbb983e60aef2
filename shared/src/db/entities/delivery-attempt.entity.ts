import { defineEntity, p } from '@mikro-orm/core';
import { TaskResult } from './task-result.entity.ts';

/**
 * One row per outbound POST to a task server: what was tried, when, and what came back. Keyed by its
 * result and its ordinal there, the key every statement finds it by: a surrogate key was one index
 * (and a sequence) more for each POST to write, and named nothing a reader asks for.
 */
const DeliveryAttemptSchema = defineEntity({
  name: 'DeliveryAttempt',
  tableName: 'delivery_attempts',
  properties: {
    taskResult: () => p.manyToOne(TaskResult).primary().deleteRule('cascade'),
    attempt: p.integer().primary(),
    startedAt: p.datetime(),
    durationMs: p.integer(),
    httpStatus: p.integer().nullable(),
    errorKind: p.string().length(64).nullable(),
    responseExcerpt: p.text().nullable(),
  },
});

export class DeliveryAttempt extends DeliveryAttemptSchema.class {}
DeliveryAttemptSchema.setClass(DeliveryAttempt);
