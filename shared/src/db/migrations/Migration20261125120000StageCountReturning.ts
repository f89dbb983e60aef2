import { Migration } from '@mikro-orm/migrations';

const FUNCTION = '"task_results_task_results_stage_open_count_fn"';

/**
 * The trigger that counts a stage's open results down as they end (Migration20261123100000StageOpenResults)
 * ran two statements for every verdict (passed or failed) and three for the one that closed its stage:
 * the decrement, then an insert that read the stage row again to see whether it was now zero, then the
 * notification, which read it a third time for the run's id. The decrement now returns the run's id
 * and the new count, so a result that leaves its stage open (two callbacks of three in a stage of three
 * tasks) costs one statement, and the one that closes it inserts and notifies from what it was told.
 * Same rows, same lock, same order; only the function changes (the trigger and its WHEN stay).
 * Measured with pgbench on a copy of the benchmark's database (one client; a result set running, then
 * its callback's statement, in a transaction rolled back; old and new function interleaved, ten rounds
 * of 4,000): the server's CPU per callback moved by -14 to +2 µs between sets of rounds, about -5 on
 * average, which is within what this measurement resolves. It is kept for being the plainer function,
 * not for its speed.
 */
export class Migration20261125120000StageCountReturning extends Migration {
  override up(): void {
    this.addSql(
      `create or replace function ${FUNCTION}() returns trigger as $$ begin declare stage_run text; still_open int; begin update task_stages set open_results = open_results - 1 where id = new.task_stage_id returning run_id, open_results into stage_run, still_open; if still_open = 0 and new.status in ('passed', 'failed') then insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts) values ('run.advance', stage_run, jsonb_build_object('runId', stage_run), now(), 0); perform pg_notify('runtasks_outbox', stage_run); end if; end; return null; end; $$ language plpgsql;`,
    );
  }

  override down(): void {
    this.addSql(
      `create or replace function ${FUNCTION}() returns trigger as $$ begin update task_stages set open_results = open_results - 1 where id = new.task_stage_id; if new.status in ('passed', 'failed') then insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts) select 'run.advance', ts.run_id, jsonb_build_object('runId', ts.run_id), now(), 0 from task_stages ts where ts.id = new.task_stage_id and ts.open_results = 0; if found then perform pg_notify('runtasks_outbox', ts.run_id) from task_stages ts where ts.id = new.task_stage_id; end if; end if; return null; end; $$ language plpgsql;`,
    );
  }
}
