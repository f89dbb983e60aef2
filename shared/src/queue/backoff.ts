import { isBackingServiceUnavailable } from '../db/unavailable.ts';

/** The backoff type every job is published with; workers compute it with `jobBackoff`. */
export const JOB_BACKOFF_TYPE = 'runtasks';

/** Failures of an ordinary kind a job may have before it fails for good (BullMQ counts this one too). */
export const ORDINARY_ATTEMPTS = 5;
/** The first retry's delay; each next one doubles. */
export const FIRST_RETRY_MS = 500;
/** The longest wait between two attempts while a backing service is away: how soon work resumes after it returns. */
export const OUTAGE_RETRY_CAP_MS = 10_000;
/**
 * How long a job keeps retrying while PostgreSQL or Redis is unavailable, counted from when it was first
 * due. Outages of minutes pass without a job failing; one longer than this fails the job, and the
 * sweeper re-drives its run once it is back, as for any job lost.
 */
export const OUTAGE_RETRY_BUDGET_MS = 30 * 60_000;
/** BullMQ's own ceiling, above what the outage budget can use at the capped delay. */
export const JOB_MAX_ATTEMPTS = 1_000;

/** What of a job the backoff reads (a BullMQ Job has these). */
export interface BackoffJob {
  timestamp: number;
  opts: { delay?: number };
}

/**
 * The delay before a failed job's next attempt, or -1 for "fails for good" (BullMQ's convention).
 * A backing service away (connection refused or lost, a shutdown, a statement timeout) is retried with a
 * doubling delay capped at OUTAGE_RETRY_CAP_MS, for up to OUTAGE_RETRY_BUDGET_MS: such a job will succeed
 * once the service is back, so it must not land in the failed set, which keeps meaning "a job that will
 * not succeed". Any other error keeps the ordinary budget of five attempts from half a second.
 * `failures` counts this failure; `jitter` in [0, 1) spreads retries so a recovering database is not
 * met by every job at once.
 */
export function jobBackoff(failures: number, error: unknown, job: BackoffJob, now: number, jitter = Math.random()): number {
  const doubling = FIRST_RETRY_MS * 2 ** Math.min(Math.max(failures - 1, 0), 20);
  if (isBackingServiceUnavailable(error)) {
    const firstDueAt = job.timestamp + (job.opts.delay ?? 0);
    if (now - firstDueAt >= OUTAGE_RETRY_BUDGET_MS) return -1;
    const capped = Math.min(doubling, OUTAGE_RETRY_CAP_MS);
    // Up to a fifth shorter, never longer than the cap.
    return Math.round(capped * (1 - 0.2 * jitter));
  }
  return failures < ORDINARY_ATTEMPTS ? doubling : -1;
}
