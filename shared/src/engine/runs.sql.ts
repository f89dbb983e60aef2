// The statements on runs of the sweeper.

/** Runs that can still have open results: `runs_unfinished_idx`'s predicate, so that a query stating it can read that index. */
export const UNFINISHED_RUN = `unfinished`;

/**
 * The results of the runs in flight, reached through the unfinished runs' index: no index on
 * task_results mentions a status or a deadline (an index that did would cost every start and every
 * close new entries in all of task_results' indexes), and a result can be open with a deadline only
 * while its run is unfinished (a run that ends cancels its open results, or has none left). So each
 * pass reads what is in flight, however many finished results there are (test/plans.int.test.ts).
 */
export const IN_FLIGHT_RESULTS = `runs r join task_stages ts on ts.run_id = r.id join task_results tr on tr.task_stage_id = ts.id
  where r.${UNFINISHED_RUN}`;

/**
 * The unfinished runs untouched for $1 seconds, a page ($5 of them) at a time, in creation order, after
 * the cursor ($2 and $3 its `created_at`, $4 its id; `created_at >= $2` is what lets the index scan start
 * there). Its condition is the predicate of `runs_unfinished_idx`, so PostgreSQL reads that index (the
 * unfinished runs, oldest first) and never the finished runs, however many there are
 * (test/plans.int.test.ts checks the plan). The index is not by `updated_at`, which would make every
 * status change of a run write an entry in every index of runs (run.entity.ts).
 */
export const IDLE_RUNS_SQL = `select id, created_at::text as cursor_at from runs
      where ${UNFINISHED_RUN} and updated_at < now() - make_interval(secs => $1)
        and created_at >= $2::timestamptz and (created_at, id) > ($3::timestamptz, $4::text)
      order by created_at, id limit $5`;

/** Records who applied a run, in the apply's transaction. */
export const RECORD_CONFIRMED_BY = 'update runs set confirmed_by = $1 where id = $2';
