import { Migration } from '@mikro-orm/migrations';

/**
 * Each task stage keeps the number of its results not yet final, so a callback's verdict learns whether
 * it closed its stage from one row (the stage's, locked by the decrement) instead of locking every
 * sibling result: O(1) row locks per callback instead of O(tasks). A trigger keeps it exact whoever
 * ends a result and records the run's wake-up when a verdict closes the stage (declared on the
 * TaskResult entity; this is its DDL). Results are locked while the counts are taken, so none ends
 * uncounted during the migration.
 */
export class Migration20261123100000StageOpenResults extends Migration {
  override up(): void {
    this.addSql(`lock table "task_results" in share mode;`);
    this.addSql(`alter table "task_stages" add "open_results" int not null default 0;`);
    this.addSql(
      `update "task_stages" ts set "open_results" = (select count(*) from "task_results" tr where tr."task_stage_id" = ts."id" and tr."status" in ('pending', 'running'));`,
    );
    this.addSql(
      `create or replace function "task_results_task_results_stage_open_count_fn"() returns trigger as $$ begin update task_stages set open_results = open_results - 1 where id = new.task_stage_id; if new.status in ('passed', 'failed') then insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts) select 'run.advance', ts.run_id, jsonb_build_object('runId', ts.run_id), now(), 0 from task_stages ts where ts.id = new.task_stage_id and ts.open_results = 0; if found then perform pg_notify('runtasks_outbox', ts.run_id) from task_stages ts where ts.id = new.task_stage_id; end if; end if; return null; end; $$ language plpgsql;`,
    );
    this.addSql(
      `create trigger "task_results_stage_open_count" AFTER UPDATE on "task_results" for each ROW
  when (old.status in ('pending', 'running') and new.status not in ('pending', 'running')) execute function "task_results_task_results_stage_open_count_fn"();`,
    );
  }

  override down(): void {
    this.addSql(`drop trigger if exists "task_results_stage_open_count" on "task_results";`);
    this.addSql(`drop function if exists "task_results_task_results_stage_open_count_fn"();`);
    this.addSql(`alter table "task_stages" drop column "open_results";`);
  }
}
