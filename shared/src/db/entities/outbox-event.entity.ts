import { defineEntity, p } from '@mikro-orm/core';

/**
 * Transactional outbox: a run and its `run.created` event commit together, and a relay publishes
 * the event to BullMQ afterwards, so a crash between commit and enqueue cannot lose it.
 */
const OutboxEventSchema = defineEntity({
  name: 'OutboxEvent',
  tableName: 'outbox_events',
  indexes: [
    {
      name: 'outbox_events_unpublished_idx',
      expression: 'create index "outbox_events_unpublished_idx" on "outbox_events" ("id") where "published_at" is null',
    },
  ],
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    topic: p.string().length(64),
    aggregateId: p.string().length(32),
    // Ids only: job data is stored in clear text in Redis, so no secret may travel through here.
    payload: p.json<Record<string, string>>(),
    createdAt: p.datetime().onCreate(() => new Date()),
    publishedAt: p.datetime().nullable(),
    publishAttempts: p.integer().default(0),
  },
});

export class OutboxEvent extends OutboxEventSchema.class {}
OutboxEventSchema.setClass(OutboxEvent);
