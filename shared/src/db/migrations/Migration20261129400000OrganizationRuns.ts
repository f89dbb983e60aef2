import { Migration } from '@mikro-orm/migrations';

/** An organization's runs, newest first (`GET /organizations/:org/runs`): read from an index, not a scan of every run. */
export class Migration20261129400000OrganizationRuns extends Migration {
  override up(): void {
    this.addSql(`create index "runs_organization_created_idx" on "runs" ("organization_id", "created_at");`);
  }

  override down(): void {
    this.addSql(`drop index if exists "runs_organization_created_idx";`);
  }
}
