import { Migration } from '@mikro-orm/migrations';

/**
 * A run's status changes in flight become HOT updates. The sweeper's and the queue's indexes were partial
 * on `status` (and the sweeper's keyed by `updated_at`), so every status change wrote an entry in each of
 * the runs' indexes: PostgreSQL updates in place only where no indexed column changes, a predicate's
 * included. Their predicates are now stored generated columns, whose values change only when a run is
 * admitted, released or ends, and the sweeper's index is keyed by creation. Adding the columns rewrites
 * the table once, with it locked while it does.
 */
export class Migration20261204000000RunsHotStatus extends Migration {
  override up(): void {
    this.addSql(
      `alter table "runs"
         add column "unfinished" boolean generated always as ("status" <> all (array['post_apply_completed', 'applied', 'planned_and_finished', 'discarded', 'errored', 'canceled'])) stored,
         add column "holds_workspace" boolean generated always as ("queue_state" = 'holding' and "status" <> all (array['post_apply_completed', 'applied', 'planned_and_finished', 'discarded', 'errored', 'canceled', 'post_apply_running'])) stored,
         add column "waits_in_queue" boolean generated always as ("queue_state" = 'queued' and "status" = 'pending') stored;`,
    );
    this.addSql(`drop index "runs_unfinished_idx";`);
    this.addSql(`create index "runs_unfinished_idx" on "runs" ("created_at", "id") where "unfinished";`);
    this.addSql(`drop index "runs_workspace_holder_idx";`);
    this.addSql(`create unique index "runs_workspace_holder_idx" on "runs" ("workspace_id") where "holds_workspace";`);
    this.addSql(`drop index "runs_workspace_queued_idx";`);
    this.addSql(`create index "runs_workspace_queued_idx" on "runs" ("workspace_id", "created_at", "id") where "waits_in_queue";`);
  }

  override down(): void {
    this.addSql(`drop index "runs_unfinished_idx";`);
    this.addSql(`drop index "runs_workspace_holder_idx";`);
    this.addSql(`drop index "runs_workspace_queued_idx";`);
    this.addSql(`alter table "runs" drop column "unfinished", drop column "holds_workspace", drop column "waits_in_queue";`);
    this.addSql(
      `create index "runs_unfinished_idx" on "runs" ("updated_at") where "status" not in ('applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled');`,
    );
    this.addSql(
      `create unique index "runs_workspace_holder_idx" on "runs" ("workspace_id") where "queue_state" = 'holding' and "status" not in ('applied', 'post_apply_running', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled');`,
    );
    this.addSql(
      `create index "runs_workspace_queued_idx" on "runs" ("workspace_id", "created_at", "id") where "queue_state" = 'queued' and "status" = 'pending';`,
    );
  }
}
