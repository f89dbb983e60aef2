import { Migration } from '@mikro-orm/migrations';

/**
 * The sweeper's index. Every pass (each worker, every 15 s) looks for unfinished runs nobody touched
 * for a while, with `status not in (…final statuses…)`, which the index on `status` cannot serve:
 * PostgreSQL read every run, finished ones included, and sorted them by `updated_at`. A partial index
 * on `updated_at` over the unfinished runs holds what that query wants, in its order, and stays as
 * small as the number of runs in flight. Nothing else reads runs by status, so the old index, which
 * every status change wrote to, goes. Like the other index migrations, this holds runs' lock while
 * the index is built.
 */
export class Migration20261124100000RunsUnfinishedIndex extends Migration {
  override up(): void {
    this.addSql(
      `create index "runs_unfinished_idx" on "runs" ("updated_at") where "status" not in ('applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled');`,
    );
    this.addSql(`drop index "runs_status_idx";`);
  }

  override down(): void {
    this.addSql(`create index "runs_status_idx" on "runs" ("status");`);
    this.addSql(`drop index "runs_unfinished_idx";`);
  }
}
