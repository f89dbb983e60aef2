import { isBackingServiceUnavailable, nativePool } from '@runtasks/shared/db';
import type { RunStatus } from '@runtasks/shared/domain';
import { attemptDeliveries, attemptDelivery, decideNotifications, overdueDeliveries } from '@runtasks/shared/notifications';
import { JOB_OPTIONS, JOBS, notificationDeliverJobId } from '@runtasks/shared/queue';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import type { Job } from 'bullmq';
import type { JobContext, JobData } from './context.ts';

/**
 * Notification jobs (docs/notifications.md): a run's status change becomes deliveries, and each
 * delivery is attempted apart from the run's own jobs, so a destination that is down never slows a run.
 */

async function enqueueDelivery(context: JobContext, deliveryId: string, attempt: number, delayMs = 0): Promise<void> {
  await context.notificationQueue.add(
    JOBS.notificationDeliver,
    { deliveryId },
    { jobId: notificationDeliverJobId(deliveryId, attempt), ...(delayMs > 0 ? { delay: delayMs } : {}), ...JOB_OPTIONS },
  );
}

/**
 * One attempt at a delivery and, when it is to be retried, the next attempt's job. A database error
 * throws (the job that attempted it is retried; the claim's lease keeps the delivery from a second send).
 */
async function attemptAndSchedule(context: JobContext, deliveryId: string, jobId: string | undefined): Promise<string> {
  const pool = await nativePool(context.orm.em);
  const step = await attemptDelivery(pool, context.notifications, deliveryId);
  context.logger.debug({ jobId, deliveryId, step }, 'notification delivery');
  if (step.kind === 'retry') await enqueueDelivery(context, deliveryId, step.attempt, step.delayMs);
  return step.kind === 'retry' ? 'retry' : step.result;
}

/**
 * A run's status change: the deliveries it decides, recorded claimed and each attempted at once by
 * this same job (a job per notice rather than one per delivery: the jobs and their bookkeeping in
 * Redis cost as much as the deliveries). Only a retry becomes a job of its own, delayed by the
 * schedule. Every attempt is made before a database error of one fails the job; its retry finds the
 * others claimed or settled.
 */
export async function processNotificationRun(context: JobContext, job: Job<JobData>): Promise<number> {
  const pool = await nativePool(context.orm.em);
  const { runId = '', status, from = null } = job.data;
  const notice = await decideNotifications(pool, runId, status as RunStatus, from as RunStatus | null);
  const attempted = await attemptDeliveries(pool, context.notifications, notice);
  context.logger.debug({ jobId: job.id, attempted }, 'notification deliveries');
  await Promise.all(
    attempted.flatMap(({ id, step }) => (step?.kind === 'retry' ? [enqueueDelivery(context, id, step.attempt, step.delayMs)] : [])),
  );
  const failed = attempted.find((attempt) => attempt.error !== undefined);
  if (failed) throw failed.error;
  return attempted.length;
}

/** A retry's attempt (or a re-driven delivery's); a further retry is the next attempt's job. */
export async function processNotificationDeliver(context: JobContext, job: Job<JobData>): Promise<string> {
  return attemptAndSchedule(context, job.data.deliveryId ?? '', job.id);
}

/**
 * The sweeper's share: deliveries whose job was lost (Redis emptied) or whose attempt crashed past its
 * lease are enqueued again, with a job id of their own (the lost one may still hold the usual id);
 * the claim makes an extra job harmless.
 */
export async function redriveNotifications(context: JobContext): Promise<number> {
  try {
    const ids = await overdueDeliveries(await nativePool(context.orm.em), context.graceSeconds);
    await Promise.all(
      ids.map((id) =>
        context.notificationQueue.add(
          JOBS.notificationDeliver,
          { deliveryId: id },
          { jobId: `notification-redrive.${id}.${Date.now()}${randomAlphanumeric(6)}`, ...JOB_OPTIONS },
        ),
      ),
    );
    return ids.length;
  } catch (error) {
    if (!isBackingServiceUnavailable(error)) throw error;
    return 0;
  }
}
