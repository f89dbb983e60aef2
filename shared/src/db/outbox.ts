import type { EntityManager } from '@mikro-orm/postgresql';
import { OUTBOX_CHANNEL } from '../queue/names.ts';

/** A condition the event is recorded under, checked in the same statement (so in the same snapshot). */
export interface OutboxCondition {
  /** A boolean SQL expression, e.g. `not exists (…)`, with `?` placeholders for `params`. */
  sql: string;
  params: readonly unknown[];
}

/**
 * Records an event for the workers in the caller's transaction (pass the transaction's EntityManager).
 * It is published to BullMQ after commit by the relay, which NOTIFY wakes at once. With a condition,
 * nothing is recorded unless it holds.
 */
export async function recordOutboxEvent(tx: EntityManager, topic: string, runId: string, condition?: OutboxCondition): Promise<void> {
  // One statement (one round trip) for the row and its NOTIFY; both take effect at commit, as before.
  await tx.execute(
    `with event as (
       insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
       select ?, ?, ?::jsonb, now(), 0 ${condition ? `where ${condition.sql}` : ''} returning aggregate_id)
     select pg_notify(?, aggregate_id) from event`,
    [topic, runId, JSON.stringify({ runId }), ...(condition?.params ?? []), OUTBOX_CHANNEL],
  );
}
