import { Migration } from '@mikro-orm/migrations';

/**
 * The runs' status trigger records a change for notifications only when the run moved to a status that
 * may give a notice (NOTICE_STATUSES in shared/src/domain/notifications.ts): before, every change did,
 * and the worker dropped about one in three (a stage's tasks starting, say) after an outbox row, a job
 * and a read of the run each. The condition is written out here, as PostgreSQL prints it back, so that
 * this migration stays what it was whatever the list becomes (RUN_NOTIFY_STATUS_WHEN).
 */
const WHEN =
  "(((old.status)::text IS DISTINCT FROM (new.status)::text) AND ((new.status)::text = ANY (ARRAY['planning'::text, 'applying'::text, 'pre_plan_awaiting_decision'::text, 'post_plan_awaiting_decision'::text, 'pre_apply_awaiting_decision'::text, 'planned'::text, 'post_plan_completed'::text, 'applied'::text, 'planned_and_finished'::text, 'post_apply_completed'::text, 'errored'::text, 'canceled'::text])))";

export class Migration20261130310046NotifyNoticeStatuses extends Migration {
  override up(): void {
    this.addSql(`drop trigger if exists "runs_notify_status" on "runs";`);
    this.addSql(
      `create trigger "runs_notify_status" AFTER UPDATE on "runs" for each ROW when (${WHEN}) execute function "runs_runs_notify_status_fn"();`,
    );
  }

  override down(): void {
    this.addSql(`drop trigger if exists "runs_notify_status" on "runs";`);
    this.addSql(
      `create trigger "runs_notify_status" AFTER UPDATE on "runs" for each ROW when (((old.status)::text IS DISTINCT FROM (new.status)::text)) execute function "runs_runs_notify_status_fn"();`,
    );
  }
}
