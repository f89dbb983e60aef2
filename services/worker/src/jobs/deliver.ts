import { JOB_OPTIONS, JOBS, taskDispatchJobId } from '@runtasks/shared/queue';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { deliverClaimed, tokenOf, wakeRunsNow, type DispatchOutcome, type StartedResult } from '@runtasks/shared/engine';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobContext, JobData } from './context.ts';

/** What a delivery attempt leaves to do: a retry later, or the run's next step once its result ended. */
export async function followUp(context: JobContext, resultId: string, outcome: DispatchOutcome): Promise<void> {
  if (outcome.kind === 'retry')
    await context.queue.add(
      JOBS.taskDispatch,
      { resultId },
      { jobId: taskDispatchJobId(resultId, outcome.attempt), delay: outcome.delayMs, ...JOB_OPTIONS },
    );
  if (outcome.kind === 'final') await wakeRunsNow(context.queue, [outcome.runId]);
}

/**
 * A dispatch the sweeper re-drives. Not the deterministic id: the lost job may still hold it (active in
 * a crashed worker until BullMQ's stall check), and BullMQ would drop the re-drive as a duplicate. The
 * claim makes extra jobs harmless.
 */
export async function redriveDispatch(context: JobContext, resultId: string, attempt: number): Promise<void> {
  await context.queue.add(
    JOBS.taskDispatch,
    { resultId },
    { jobId: `${taskDispatchJobId(resultId, attempt)}.redrive-${Date.now()}${randomAlphanumeric(6)}`, ...JOB_OPTIONS },
  );
}

/**
 * After commit, the started results' first attempts, claimed by the advance, are delivered here (no
 * job in between); a crash before they end leaves leases the sweeper re-drives when they expire.
 * Meanwhile the started stages' deadline is scheduled (their results share it; one extended by progress
 * is the sweeper's).
 */
export async function deliverStarted(
  context: JobContext,
  job: Job<JobData>,
  em: EntityManager,
  started: readonly StartedResult[],
): Promise<number> {
  if (started.length === 0) return 0;
  const stageIds = [...new Set(started.map((result) => result.stageId))];
  const scheduled = Promise.all(stageIds.map((stageId) => context.stageDeadlines.write(stageId)));
  // Awaited after the deliveries; a rejection meanwhile must not count as unhandled.
  scheduled.catch(() => undefined);
  const delivered = await Promise.allSettled(
    started.map(async ({ row, issued }) => {
      const outcome = await deliverClaimed(em, context.dispatchDeps, row, tokenOf(context.secrets, row, issued));
      context.logger.debug({ jobId: job.id, taskResultId: row.id, outcome: outcome.kind }, 'task dispatch');
      await followUp(context, row.id, outcome);
    }),
  );
  await scheduled;
  const failed = delivered.find((settled) => settled.status === 'rejected');
  if (failed) throw failed.reason;
  return started.length;
}
