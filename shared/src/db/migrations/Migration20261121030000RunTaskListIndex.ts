import { Migration } from '@mikro-orm/migrations';

/**
 * An organization's run tasks are listed in creation order (`GET /organizations/:org/tasks`): this
 * index serves that order, so a page is read from the index instead of sorting all of the
 * organization's tasks on every request (measured in bench/, H4 list growth).
 */
export class Migration20261121030000RunTaskListIndex extends Migration {
  override up(): void {
    this.addSql(`create index "run_tasks_organization_created_idx" on "run_tasks" ("organization_id", "created_at", "id");`);
  }

  override down(): void {
    this.addSql(`drop index if exists "run_tasks_organization_created_idx";`);
  }
}
