import { Migration } from '@mikro-orm/migrations';

/**
 * Who did what to a run, and when (HCP's run events): a run's creation, its confirmation, discard,
 * cancel, the override of one of its task stages, a pipeline's reports, and comments. The engine
 * writes each row in the transaction of the action it records. `actor_id` is a user id, without a
 * foreign key (as `runs.created_by`); a comment given with the action is a run comment, linked here.
 */
export class Migration20261128100000RunEvents extends Migration {
  override up(): void {
    this.addSql(
      `create table "run_events" ("id" varchar(32) not null, "run_id" varchar(32) not null, "action" text not null, "actor_id" text null, "comment_id" varchar(32) null, "task_stage_id" varchar(32) null, "description" text null, "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "run_events_comment_idx" on "run_events" ("comment_id");`);
    this.addSql(`create index "run_events_run_idx" on "run_events" ("run_id", "created_at");`);
    this.addSql(
      `alter table "run_events" add constraint "run_events_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "run_events" add constraint "run_events_comment_id_foreign" foreign key ("comment_id") references "run_comments" ("id") on delete set null;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "run_events" cascade;`);
  }
}
