/** Queue and job naming in one place, so producers, consumers and the dashboard agree. */
export const QUEUES = { runs: 'runs' } as const;

export const JOBS = {
  runCreated: 'run.created',
  /** Re-evaluate a run and take its next steps; idempotent, so it may be sent any number of times. */
  runAdvance: 'run.advance',
  taskDispatch: 'task.dispatch',
  /** Delayed to a result's progress deadline: ends it as errored if nothing moved it since. */
  taskDeadline: 'task.deadline',
  sweep: 'sweep',
} as const;
export type JobName = (typeof JOBS)[keyof typeof JOBS];

/** Deterministic ids make re-publishing a no-op while the job exists (no `:` allowed in BullMQ ids). */
export const runCreatedJobId = (runId: string): string => `run-created.${runId}`;

/** The job id of an outbox event: one per run for run.created, one per event otherwise. */
export function outboxJobId(topic: string, aggregateId: string, eventId: string | number): string {
  if (topic === JOBS.runCreated) return runCreatedJobId(aggregateId);
  return `${topic.replaceAll('.', '-')}.${aggregateId}.${eventId}`;
}

export const taskDispatchJobId = (resultId: string, attempt: number): string => `task-dispatch.${resultId}.${attempt}`;

/** PostgreSQL NOTIFY channel the relay listens on, so published events move without waiting for a poll. */
export const OUTBOX_CHANNEL = 'runtasks_outbox';

/** PostgreSQL NOTIFY channel of changes to tokens and teams: API processes forget the principals they know. */
export const PRINCIPALS_CHANNEL = 'runtasks_principals';
