import { FIRST_RETRY_MS, JOB_BACKOFF_TYPE, JOB_MAX_ATTEMPTS } from './backoff.ts';

/** Queue and job naming in one place, so producers, consumers and the dashboard agree. */
export const QUEUES = {
  runs: 'runs',
  /** Notification jobs (notification.run, notification.deliver): a queue of their own, worked at NOTIFICATION_CONCURRENCY, so deliveries never take the run engine's slots. */
  notifications: 'notifications',
} as const;

export const JOBS = {
  runCreated: 'run.created',
  /** Re-evaluate a run and take its next steps; idempotent, so it may be sent any number of times. */
  runAdvance: 'run.advance',
  taskDispatch: 'task.dispatch',
  /** Delayed to a result's progress deadline: ends it as errored if nothing moved it since. */
  taskDeadline: 'task.deadline',
  sweep: 'sweep',
  /** A run's status change that its workspace's notifications may want (recorded by the runs' trigger). */
  notificationRun: 'notification.run',
  /** One attempt at one notification delivery. */
  notificationDeliver: 'notification.deliver',
  /** Repeated hourly: deletes audit trail events past AUDIT_TRAIL_RETENTION_DAYS. */
  auditPrune: 'audit.prune',
} as const;
export type JobName = (typeof JOBS)[keyof typeof JOBS];

/** The queue a job of this name goes to: notification jobs to their own. */
export const queueOfJob = (name: string): (typeof QUEUES)[keyof typeof QUEUES] =>
  name === JOBS.notificationRun || name === JOBS.notificationDeliver ? QUEUES.notifications : QUEUES.runs;

/** How long finished jobs are kept: every publisher of a job uses these, so that its copies agree. */
export const JOB_RETENTION = { removeOnComplete: { age: 86_400, count: 1000 }, removeOnFail: { age: 7 * 86_400 } } as const;

/**
 * How every job is published, by the API, the outbox relay and the workers alike: kept as JOB_RETENTION
 * says, and a failed one retried as `jobBackoff` decides (the workers compute it): five attempts from
 * half a second for an ordinary error, and for as long as an outage of minutes lasts while PostgreSQL or
 * Redis is away. Jobs are wake-up signals, so the sweeper re-drives a run whose job failed for good, but
 * only once it has been idle for twice its interval.
 */
export const JOB_OPTIONS = {
  ...JOB_RETENTION,
  attempts: JOB_MAX_ATTEMPTS,
  backoff: { type: JOB_BACKOFF_TYPE, delay: FIRST_RETRY_MS },
} as const;

/** A `run.created` job's data: the run, and the stage it was created in where it started one at once. */
export interface RunCreatedJob {
  runId: string;
  stageId?: string;
}

/** Deterministic ids make re-publishing a no-op while the job exists (no `:` allowed in BullMQ ids). */
export const runCreatedJobId = (runId: string): string => `run-created.${runId}`;

/** The job id of an outbox event: one per run for run.created, one per event otherwise. */
export function outboxJobId(topic: string, aggregateId: string, eventId: string | number): string {
  if (topic === JOBS.runCreated) return runCreatedJobId(aggregateId);
  return `${topic.replaceAll('.', '-')}.${aggregateId}.${eventId}`;
}

export const notificationDeliverJobId = (deliveryId: string, attempt: number): string => `notification-deliver.${deliveryId}.${attempt}`;

export const taskDispatchJobId = (resultId: string, attempt: number): string => `task-dispatch.${resultId}.${attempt}`;

/** PostgreSQL NOTIFY channel the relay listens on, so published events move without waiting for a poll. */
export const OUTBOX_CHANNEL = 'runtasks_outbox';

/** PostgreSQL NOTIFY channel of changes to tokens and teams: API processes forget the principals they know. */
export const PRINCIPALS_CHANNEL = 'runtasks_principals';
