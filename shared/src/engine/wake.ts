import type { Queue } from 'bullmq';
import { randomAlphanumeric } from '../domain/ids.ts';
import { JOB_OPTIONS, JOBS, OUTBOX_CHANNEL } from '../queue/names.ts';

/**
 * The one rule for waking a run after something outside its advance changed it (a result ended, a
 * stage was overridden, the run was canceled, discarded or applied, a pipeline reported): a
 * `run.advance` job. Where the change is a database statement (the API, the trigger), the wake-up is an
 * outbox event recorded by that statement, so it commits with the change, and a NOTIFY that has the
 * relay publish it at once. Where the worker ended a result itself (a delivery that failed, a
 * deadline), it publishes the same job right away (wakeRunsNow): it holds the queue, and the sweeper
 * re-drives a run whose wake-up a crash lost.
 */
const OUTBOX_COLUMNS = '(topic, aggregate_id, payload, created_at, publish_attempts)';
const wakeValues = (run: string): string => `'${JOBS.runAdvance}', ${run}, jsonb_build_object('runId', ${run}), now(), 0`;

/**
 * The end of a statement that wakes runs: the CTE `woken` records a wake-up for each row of `runIds`
 * (a query with a `run_id` column), and the final select notifies the relay. Its rows are the woken runs.
 */
export const wakeRunsSql = (runIds: string): string =>
  `woken as (insert into outbox_events ${OUTBOX_COLUMNS} select ${wakeValues('run_id')} from (${runIds}) woken_runs returning aggregate_id)
   select pg_notify('${OUTBOX_CHANNEL}', aggregate_id) from woken`;

/** The same wake-up in PL/pgSQL, for the trigger that sees a verdict close its stage (`run` a variable). */
export const wakeRunPlpgsql = (run: string): string =>
  `insert into outbox_events ${OUTBOX_COLUMNS} values (${wakeValues(run)}); perform pg_notify('${OUTBOX_CHANNEL}', ${run});`;

/** A run.advance job's id: unique, as a run may be woken again while an earlier wake-up waits. */
export const advanceJobId = (runId: string): string => `run-advance.${runId}.${Date.now()}${randomAlphanumeric(6)}`;

/** Publishes the wake-up of these runs now (the worker's, for the results it ended itself). */
export async function wakeRunsNow(queue: Queue, runIds: readonly string[]): Promise<void> {
  await Promise.all(runIds.map((runId) => queue.add(JOBS.runAdvance, { runId }, { jobId: advanceJobId(runId), ...JOB_OPTIONS })));
}
