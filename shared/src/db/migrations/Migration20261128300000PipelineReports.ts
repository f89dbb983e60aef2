import { Migration } from '@mikro-orm/migrations';

/**
 * What a pipeline's reports and retries need of a run: the SHA-256 of the plan JSON it reported and of
 * its binary plan file (so a repeated report is recognised as the same, and an apply of another plan
 * file refused), and the idempotency key its `POST /runs` carried with a fingerprint of that request's
 * body (so a retried creation finds its run instead of making a second). A key names at most one run
 * per workspace; runs created without one are not in the index.
 */
export class Migration20261128300000PipelineReports extends Migration {
  override up(): void {
    this.addSql(
      `alter table "runs" add column "plan_json_sha256" text null, add column "plan_file_sha256" text null, add column "idempotency_key" text null, add column "idempotency_fingerprint" text null;`,
    );
    this.addSql(
      `create unique index "runs_workspace_idempotency_key_idx" on "runs" ("workspace_id", "idempotency_key") where "idempotency_key" is not null;`,
    );
  }

  override down(): void {
    this.addSql(`drop index if exists "runs_workspace_idempotency_key_idx";`);
    this.addSql(
      `alter table "runs" drop column "plan_json_sha256", drop column "plan_file_sha256", drop column "idempotency_key", drop column "idempotency_fingerprint";`,
    );
  }
}
