import { defineEntity, p } from '@mikro-orm/core';
import { NotificationConfiguration, type DeliveryResponse } from './notification-configuration.entity.ts';
import { Run } from './run.entity.ts';

/**
 * One notification to deliver: a configuration told of a run's trigger once (the unique key), whatever
 * the number of events or jobs that asked for it. `message`, `runStatus` and `runUpdatedAt` are what
 * the notification says, fixed when it was decided. `status` is `pending` until delivered, `failed`
 * after the last attempt or a refusal, `skipped` when the configuration was disabled meanwhile. A
 * pending delivery is due at `dueAt`; an attempt leases it by moving `dueAt` ahead, and the sweeper
 * re-drives one whose lease ran out. `responses` are its attempts' answers, the latest first (at most
 * DELIVERY_RESPONSES_KEPT), and `answeredAt` the time of the latest: its configuration's
 * `delivery-responses` are read from here (Migration20261201200000DeliveryResponsesApart).
 */
const NotificationDeliverySchema = defineEntity({
  name: 'NotificationDelivery',
  tableName: 'notification_deliveries',
  uniques: [{ name: 'notification_deliveries_key_unique', properties: ['configuration', 'run', 'trigger', 'occasion'] }],
  indexes: [
    {
      name: 'notification_deliveries_due_idx',
      expression: `create index "notification_deliveries_due_idx" on "notification_deliveries" ("due_at") where "status" = 'pending'`,
    },
    { name: 'notification_deliveries_run_idx', properties: ['run'] },
    {
      name: 'notification_deliveries_answered_idx',
      expression: `create index "notification_deliveries_answered_idx" on "notification_deliveries" ("configuration_id", "answered_at") where "answered_at" is not null`,
    },
  ],
  properties: {
    id: p.string().length(32).primary(),
    configuration: () => p.manyToOne(NotificationConfiguration).deleteRule('cascade'),
    run: () => p.manyToOne(Run).deleteRule('cascade'),
    trigger: p.text(),
    occasion: p.text(),
    message: p.text(),
    runStatus: p.text(),
    runUpdatedAt: p.datetime(),
    status: p.text().$type<'pending' | 'delivered' | 'failed' | 'skipped'>(),
    attempts: p.integer().default(0),
    dueAt: p.datetime(),
    lastError: p.text().nullable(),
    deliveredAt: p.datetime().nullable(),
    responses: p.json<DeliveryResponse[]>().nullable(),
    answeredAt: p.datetime().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
  },
});

export class NotificationDelivery extends NotificationDeliverySchema.class {}
NotificationDeliverySchema.setClass(NotificationDelivery);
