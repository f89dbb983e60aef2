import { Migration } from '@mikro-orm/migrations';

/**
 * Each organization keeps the number of its run tasks, so listing them (`meta.pagination.total-count`)
 * costs the same with 100,000 tasks as with ten instead of counting every row on every page (measured
 * in bench/, H4 list growth). Triggers keep it exact whoever inserts or deletes tasks (the API, an
 * organization's cascade, a bulk load); they are declared on the RunTask entity, and this is their DDL.
 */
export class Migration20261123000000RunTaskCount extends Migration {
  override up(): void {
    this.addSql(`alter table "organizations" add column "run_task_count" int not null default 0;`);
    this.addSql(`update "organizations" o set "run_task_count" = (select count(*) from "run_tasks" t where t."organization_id" = o."id");`);
    this.addSql(
      `create or replace function "run_tasks_run_tasks_count_insert_fn"() returns trigger as $$ begin update organizations set run_task_count = run_task_count + 1 where id = new.organization_id; return null; end; $$ language plpgsql;`,
    );
    this.addSql(
      `create trigger "run_tasks_count_insert" after insert on "run_tasks" for each row execute function "run_tasks_run_tasks_count_insert_fn"();`,
    );
    this.addSql(
      `create or replace function "run_tasks_run_tasks_count_delete_fn"() returns trigger as $$ begin update organizations set run_task_count = run_task_count - 1 where id = old.organization_id; return null; end; $$ language plpgsql;`,
    );
    this.addSql(
      `create trigger "run_tasks_count_delete" after delete on "run_tasks" for each row execute function "run_tasks_run_tasks_count_delete_fn"();`,
    );
  }

  override down(): void {
    this.addSql(`drop trigger if exists "run_tasks_count_delete" on "run_tasks";`);
    this.addSql(`drop function if exists "run_tasks_run_tasks_count_delete_fn"();`);
    this.addSql(`drop trigger if exists "run_tasks_count_insert" on "run_tasks";`);
    this.addSql(`drop function if exists "run_tasks_run_tasks_count_insert_fn"();`);
    this.addSql(`alter table "organizations" drop column "run_task_count";`);
  }
}
