import { Migration } from '@mikro-orm/migrations';

/**
 * Cheaper updates of the rows every run updates several times. Free space on each page (fillfactor)
 * lets an update that changes no indexed column stay on its page without new index entries (a HOT
 * update): a delivery's acknowledgement, a stage's open-result count, a progress callback's deadline.
 * The deadline index holds open results only, so a result's final update adds nothing to it.
 * Fillfactor applies to pages written from now on.
 */
export class Migration20261123110000HotUpdates extends Migration {
  override up(): void {
    this.addSql(`alter table "task_results" set (fillfactor = 80);`);
    this.addSql(`alter table "task_stages" set (fillfactor = 80);`);
    this.addSql(`alter table "runs" set (fillfactor = 80);`);
    this.addSql(
      `create index "task_results_open_deadline_idx" on "task_results" ("progress_deadline") where "status" in ('pending', 'running');`,
    );
    this.addSql(`drop index "task_results_status_deadline_idx";`);
  }

  override down(): void {
    this.addSql(`create index "task_results_status_deadline_idx" on "task_results" ("status", "progress_deadline");`);
    this.addSql(`drop index "task_results_open_deadline_idx";`);
    this.addSql(`alter table "runs" reset (fillfactor);`);
    this.addSql(`alter table "task_stages" reset (fillfactor);`);
    this.addSql(`alter table "task_results" reset (fillfactor);`);
  }
}
