import { Migration } from '@mikro-orm/migrations';

/**
 * Comments on runs, as HCP Terraform keeps them: written through the comments API or given to a run
 * action or a task stage override. A comment belongs to its run and goes with it.
 */
export class Migration20261126990000RunComments extends Migration {
  override up(): void {
    this.addSql(
      `create table "run_comments" ("id" varchar(32) not null, "run_id" varchar(32) not null, "body" text not null, "created_by" text null, "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "run_comments_run_idx" on "run_comments" ("run_id", "created_at");`);
    this.addSql(
      `alter table "run_comments" add constraint "run_comments_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "run_comments" cascade;`);
  }
}
