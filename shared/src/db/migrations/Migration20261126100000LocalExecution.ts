import { Migration } from '@mikro-orm/migrations';

/**
 * Local execution: a workspace's `execution_mode` (the runs of a `local` workspace wait for their
 * pipeline to report plan and apply), and on each run its mode as it began, its apply's id, what its
 * plan changes and why its plan or apply errored. Existing runs get an apply id made from their own id
 * (unique as theirs is), then the column is required like `plan_id`.
 */
export class Migration20261126100000LocalExecution extends Migration {
  override up(): void {
    this.addSql(`alter table "workspaces" add column "execution_mode" text not null default 'remote';`);
    this.addSql(
      `alter table "runs" add column "apply_id" varchar(32) null, add column "execution_mode" text not null default 'remote',
         add column "has_changes" boolean not null default false, add column "resource_additions" int not null default 0,
         add column "resource_changes" int not null default 0, add column "resource_destructions" int not null default 0,
         add column "resource_imports" int not null default 0, add column "execution_error" text null;`,
    );
    this.addSql(`update "runs" set "apply_id" = 'apply-' || substr(md5("id"), 1, 16);`);
    this.addSql(`alter table "runs" alter column "apply_id" set not null;`);
    this.addSql(`alter table "runs" add constraint "runs_apply_id_unique" unique ("apply_id");`);
  }

  override down(): void {
    this.addSql(
      `alter table "runs" drop column "apply_id", drop column "execution_mode", drop column "has_changes", drop column "resource_additions",
         drop column "resource_changes", drop column "resource_destructions", drop column "resource_imports", drop column "execution_error";`,
    );
    this.addSql(`alter table "workspaces" drop column "execution_mode";`);
  }
}
