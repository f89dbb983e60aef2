import { Migration } from '@mikro-orm/migrations';

/**
 * Whether a run's task stages were planned when it was created. A pending run without stages was taken
 * for one created by an earlier version (which planned in the worker) and planned by its first advance,
 * from the tasks attached by then: a run created with no tasks, in a workspace that had one attached
 * before a worker took the run up, got stages its creator never saw (the CLI reads them once, at
 * creation). Runs are now created with the flag set; a run inserted without it (by a process of an
 * earlier version, during an upgrade) is still planned by its advance, once. Of the runs already here,
 * the pending ones that have stages were planned; those without stay as they were judged before.
 */
export class Migration20261125170000RunStagesPlanned extends Migration {
  override up(): void {
    this.addSql(`alter table "runs" add column "stages_planned" boolean not null default false;`);
    this.addSql(
      `update "runs" r set "stages_planned" = true where r."status" = 'pending' and exists (select 1 from "task_stages" ts where ts."run_id" = r."id");`,
    );
  }

  override down(): void {
    this.addSql(`alter table "runs" drop column "stages_planned";`);
  }
}
