import { wakeRunPlpgsql } from './wake.ts';

/**
 * The body of task_results' trigger `task_results_stage_open_count` (after an update that takes a
 * result out of pending/running). Whoever ends a result (a callback, the sweeper, the dispatcher, a
 * cancel) keeps its stage's open_results exact: the update takes the stage row's lock and counts on its
 * newest version, so of concurrent last results exactly one sees zero. A verdict (passed/failed, which
 * only callbacks give) that closes the stage wakes the run with it (wake.ts); the other endings wake
 * the run themselves. The decrement returns what the wake-up needs (one statement when the stage stays
 * open, which is most callbacks). Written as PostgreSQL prints it back (the schema comparison is textual).
 */
export const STAGE_OPEN_COUNT_TRIGGER_BODY = `declare stage_run text; still_open int;
        begin
          update task_stages set open_results = open_results - 1 where id = new.task_stage_id
            returning run_id, open_results into stage_run, still_open;
          if still_open = 0 and new.status in ('passed', 'failed') then
            ${wakeRunPlpgsql('stage_run')}
          end if;
        end;
        return null;`.replace(/\s+/g, ' ');
