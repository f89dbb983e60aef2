import { pruneAuditEvents } from '@runtasks/shared/audit';
import { isBackingServiceUnavailable, nativePool } from '@runtasks/shared/db';
import { objectStoreFor, removeExpiredObjects } from '@runtasks/shared/storage';
import { JOBS, type JobName } from '@runtasks/shared/queue';
import { advanceRun, claimStartedAtCreation, dispatchResult, expireResults, sweep, wakeRunsNow } from '@runtasks/shared/engine';
import type { Job } from 'bullmq';
import { forkEm, type JobContext, type JobData } from './context.ts';
import { deliverStarted, followUp, redriveDispatch } from './deliver.ts';
import { processNotificationDeliver, processNotificationRun, redriveNotifications } from './notifications.ts';

type Processor = (context: JobContext, job: Job<JobData>) => Promise<unknown>;

/** An advance of the run: the engine moves it, and the results it started are delivered. */
async function processAdvance(context: JobContext, job: Job<JobData>): Promise<number> {
  const runId = job.data.runId ?? '';
  const em = forkEm(context);
  const started = await advanceRun(em, context.advanceDb, runId, context.executor, context.settings);
  context.logger.debug({ jobId: job.id, jobName: job.name, runId, dispatching: started.length }, 'run advanced');
  return deliverStarted(context, job, em, started);
}

/** A run the API created in its first stage: that stage's results are claimed and delivered (no advance to make). */
async function processStartedAtCreation(context: JobContext, job: Job<JobData>, stageId: string): Promise<number> {
  const em = forkEm(context);
  const claimed = await claimStartedAtCreation(em, stageId);
  context.logger.debug({ jobId: job.id, jobName: job.name, runId: job.data.runId, dispatching: claimed.length }, 'created stage claimed');
  return deliverStarted(
    context,
    job,
    em,
    claimed.map((row) => ({ stageId, row, issued: undefined })),
  );
}

async function processDispatch(context: JobContext, job: Job<JobData>): Promise<string> {
  const resultId = job.data.resultId ?? '';
  const outcome = await dispatchResult(forkEm(context), context.dispatchDeps, resultId);
  context.logger.debug({ jobId: job.id, taskResultId: resultId, outcome: outcome.kind }, 'task dispatch');
  await followUp(context, resultId, outcome);
  return outcome.kind;
}

/**
 * Woken at the progress deadline; a deadline extended by progress callbacks makes this a no-op (the
 * sweeper catches the later one). One stage or one result in jobs of earlier versions.
 */
async function processDeadline(context: JobContext, job: Job<JobData>): Promise<number> {
  const stageIds = job.data.stageIds ?? (job.data.stageId ? [job.data.stageId] : undefined);
  const runIds = await expireResults(forkEm(context), stageIds ? { stageIds } : { resultId: job.data.resultId ?? '' });
  await wakeRunsNow(context.queue, runIds);
  return runIds.length;
}

async function processSweep(context: JobContext, job: Job<JobData>): Promise<unknown> {
  try {
    const { runIds, resultIds, idleCursor } = await sweep(forkEm(context), context.graceSeconds, {
      idleCursor: context.sweep.idleCursor,
      maxAttempts: context.config.taskRetryDelaysMs.length + 1,
      localTimeouts: context.config.localTimeouts,
    });
    context.sweep.idleCursor = idleCursor;
    const [notifications] = await Promise.all([
      redriveNotifications(context),
      wakeRunsNow(context.queue, runIds),
      ...resultIds.map(({ id, attempt }) => redriveDispatch(context, id, attempt)),
    ]);
    // Storage retention, a bounded batch a pass (STORAGE_RETENTION_DAYS; incomplete writes always).
    const pool = await nativePool(forkEm(context));
    const removed = await removeExpiredObjects(pool, objectStoreFor(pool, context.config.storage), context.config.storage.retentionMs);
    return { runs: runIds.length, results: resultIds.length, notifications, removedObjects: removed };
  } catch (error) {
    // The next sweep comes within its interval and does this one's work: a pass the outage prevented
    // is skipped, neither retried (sweeps would pile up for as long as it lasts) nor failed.
    if (!isBackingServiceUnavailable(error)) throw error;
    context.logger.debug({ err: error, jobId: job.id }, 'sweep skipped: a backing service is unavailable');
    return { skipped: 'a backing service is unavailable' };
  }
}

/** Deletes the audit trail's events past their retention (AUDIT_TRAIL_RETENTION_DAYS): repeated hourly. */
async function processAuditPrune(context: JobContext, job: Job<JobData>): Promise<number> {
  const pruned = await pruneAuditEvents(await nativePool(context.orm.em), context.config.auditTrailRetentionDays);
  context.logger.debug({ jobId: job.id, pruned }, 'audit trail pruned');
  return pruned;
}

/** Every job the worker takes, by name. */
export const PROCESSORS: Record<JobName, Processor> = {
  [JOBS.runCreated]: (context, job) =>
    job.data.stageId ? processStartedAtCreation(context, job, job.data.stageId) : processAdvance(context, job),
  [JOBS.runAdvance]: processAdvance,
  [JOBS.taskDispatch]: processDispatch,
  [JOBS.taskDeadline]: processDeadline,
  [JOBS.sweep]: processSweep,
  [JOBS.notificationRun]: processNotificationRun,
  [JOBS.notificationDeliver]: processNotificationDeliver,
  [JOBS.auditPrune]: processAuditPrune,
};
