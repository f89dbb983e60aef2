import type { Queue } from 'bullmq';
import type { Config } from '../config.ts';
import { JOB_OPTIONS, JOBS } from '../queue/names.ts';
import { BatchWriter } from './batch-writer.ts';

/**
 * The deadline policy of a task result, in one place: computed as it starts (its progress deadline and
 * its hard deadline), moved on by progress callbacks, scheduled by the worker (one job per batch of
 * started stages), and expired by that job or the sweeper (expire.ts). The configuration's names are
 * kept throughout: TASK_PROGRESS_TIMEOUT_SECONDS is `taskProgressTimeoutSeconds` everywhere.
 */
export type ResultDeadlines = Pick<Config, 'taskProgressTimeoutSeconds' | 'taskMaxRuntimeSeconds'>;

/** The progress deadline never outlives the hard one, even where the progress timeout is set longer than the maximum runtime. */
export const resultDeadlines = (config: ResultDeadlines): ResultDeadlines => ({
  taskProgressTimeoutSeconds: Math.min(config.taskProgressTimeoutSeconds, config.taskMaxRuntimeSeconds),
  taskMaxRuntimeSeconds: config.taskMaxRuntimeSeconds,
});

/** A deadline `seconds` (an SQL expression) from the database clock's now. */
export const deadlineIn = (seconds: string): string => `now() + make_interval(secs => ${seconds})`;

/** The SET list giving a starting result its deadlines, from SQL expressions of its timeouts in seconds. */
export const resultStartDeadlines = (progressSeconds: string, maxSeconds: string): string =>
  `progress_deadline = ${deadlineIn(progressSeconds)}, hard_deadline = ${deadlineIn(maxSeconds)}`;

/**
 * A callback's assignment of the progress deadline (`tr` the result; `status` and `timeout` SQL expressions): a `running`
 * callback moves it on, never past the hard deadline; a verdict leaves it.
 */
export const callbackProgressDeadline = (status: string, timeout: string): string =>
  `progress_deadline = case when ${status} = 'running' then least(${deadlineIn(`${timeout}::double precision`)}, coalesce(tr.hard_deadline, 'infinity'))
        else tr.progress_deadline end`;

/** A result (`tr`) still within both its deadlines: past either it takes no callback, and is expired. */
export const WITHIN_DEADLINES = `(tr.hard_deadline is null or tr.hard_deadline > now()) and (tr.progress_deadline is null or tr.progress_deadline > now())`;

/** A result (`tr`) past one of its deadlines. */
export const PAST_DEADLINE = `(tr.progress_deadline < now() or tr.hard_deadline < now())`;

/** A result (`tr`) past its hard deadline (it ran longer than its maximum runtime). */
export const PAST_HARD_DEADLINE = `tr.hard_deadline < now()`;

/** A result whose progress deadline (if any) is later than `delay` seconds (an SQL expression) from now: a retry then is still in time. */
export const deadlineOutlasts = (delay: string): string => `(progress_deadline is null or progress_deadline > ${deadlineIn(delay)})`;

/** Stages in one deadline job at most. */
const DEADLINE_BATCH = 500;

/**
 * Schedules the deadline of started stages: one delayed task.deadline job for the stages started while
 * the previous one was being added (one stage each when idle), so that under load a handful of jobs a
 * second wait in Redis for the whole progress timeout instead of one per stage. Added after the stages
 * started, so it fires (just) after their results' progress deadline.
 */
export function stageDeadlineScheduler(queue: Queue, deadlines: ResultDeadlines): BatchWriter<string> {
  return new BatchWriter<string>(async (stageIds) => {
    const [first] = stageIds;
    await queue.add(
      JOBS.taskDeadline,
      { stageIds },
      {
        jobId: stageIds.length === 1 ? `task-deadline.${first}` : `task-deadline.${first}.and-${stageIds.length - 1}`,
        delay: deadlines.taskProgressTimeoutSeconds * 1000 + 50,
        ...JOB_OPTIONS,
      },
    );
  }, DEADLINE_BATCH);
}
