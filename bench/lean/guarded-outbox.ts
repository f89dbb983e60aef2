/**
 * The guarded lean reference's outbox (bench/lean/guarded-schema.ts): a job the pipeline needs is a
 * row written in the transaction that makes it needed, added to BullMQ once that has committed (its
 * row's id as the job id, so adding it twice adds it once), then marked published. What a crash
 * between commit and publication leaves unpublished, a relay would publish: none runs here, since
 * none would have anything to do in a benchmark's burst.
 */
import type { Queue } from 'bullmq';
import type pg from 'pg';

export interface OutboxEvent {
  id: string;
  topic: string;
  aggregate_id: string;
}

const JOB_OPTIONS = { removeOnComplete: true, removeOnFail: 1000 } as const;

export async function publish(pool: pg.Pool, queue: Queue, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  await queue.addBulk(
    events.map((event) => ({ name: event.topic, data: { id: event.aggregate_id }, opts: { ...JOB_OPTIONS, jobId: `ev-${event.id}` } })),
  );
  await pool.query({
    name: 'guarded-published',
    text: 'update lean_guarded.outbox set published_at = now() where id = any($1::bigint[])',
    values: [events.map((event) => event.id)],
  });
}
