/**
 * The statements the harness reads a pipeline's progress with, for the project's tables or the
 * lean reference's (bench/lean): so H1 and H2 measure both the same way.
 */
export interface RunTables {
  /** Columns ok, failed, total: runs applied, runs in a failed final state, all runs. */
  progress: string;
  /** Column seconds: from the first run's creation to the last run's application (database clock). */
  seconds: string;
  /** Column open: runs not final yet. */
  unfinished: string;
  /** Columns id, applied (epoch ms, null while not applied). */
  applied: string;
  /** Empties the run tables between samples. */
  truncate: string;
}

const FINAL_FAILED = `('errored', 'canceled', 'discarded', 'planned_and_finished', 'post_apply_completed')`;

export const PROJECT_TABLES: RunTables = {
  progress: `select count(*) filter (where status = 'applied') as ok, count(*) filter (where status in ${FINAL_FAILED}) as failed, count(*) as total from runs`,
  seconds: `select extract(epoch from max((status_timestamps ->> 'applied-at')::timestamptz) - min(created_at))::float8 as seconds from runs where status = 'applied'`,
  unfinished: `select count(*) as open from runs where status not in ('applied', 'errored', 'canceled')`,
  applied: `select id, extract(epoch from (status_timestamps ->> 'applied-at')::timestamptz) * 1000 as applied from runs`,
  // cascade: whatever else hangs off a run (its events, and what later features add) goes with it.
  truncate: 'truncate runs, run_comments, task_stages, task_results, task_result_outcomes, delivery_attempts, outbox_events cascade',
};
