import { Migration } from '@mikro-orm/migrations';

/**
 * The workspace run queue and workspace locking. A run's `queue_state` is `queued` while it waits and
 * `holding` once admitted; the unique partial index lets at most one admitted run per workspace be in
 * a holding status (its predicate is RELEASED_RUN_STATUSES in shared/src/domain/run-queue.ts), so two
 * admissions can never both win, whatever races or crashes. Runs that exist already stay outside the
 * queue (null): they go on as they started. A person's lock is the `lock_*` columns of the workspace.
 */
export class Migration20261126700000WorkspaceQueue extends Migration {
  override up(): void {
    this.addSql(`alter table "runs" add column "queue_state" text null;`);
    this.addSql(
      `create unique index "runs_workspace_holder_idx" on "runs" ("workspace_id") where "queue_state" = 'holding' and "status" not in ('applied', 'post_apply_running', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled');`,
    );
    this.addSql(
      `create index "runs_workspace_queued_idx" on "runs" ("workspace_id", "created_at", "id") where "queue_state" = 'queued' and "status" = 'pending';`,
    );
    this.addSql(
      `alter table "workspaces" add column "lock_kind" text null, add column "lock_owner_id" text null, add column "lock_reason" text null;`,
    );
  }

  override down(): void {
    this.addSql(`alter table "workspaces" drop column "lock_kind", drop column "lock_owner_id", drop column "lock_reason";`);
    this.addSql(`drop index "runs_workspace_queued_idx";`);
    this.addSql(`drop index "runs_workspace_holder_idx";`);
    this.addSql(`alter table "runs" drop column "queue_state";`);
  }
}
