import { Migration } from '@mikro-orm/migrations';

/**
 * HCP's run attributes that a run keeps from its creation (`refresh`, `target-addrs`, `variables`, ...)
 * as one JSON object, `options`: nothing in the engine reads them, so one column keeps the run's insert
 * small. `confirmed_by` records who applied a run and `api_tokens.created_by` who created a token, as
 * the acting principal's user id (services/api/src/auth/actor.ts); the runs' `created_by`, which held
 * the creating token's id, is turned into the same form. Configuration versions become `provisional`
 * and can be `archived` (their archive dropped); whether a run uses a version is found by an index.
 */
export class Migration20261126800000RunAttributes extends Migration {
  override up(): void {
    this.addSql(`alter table "runs" add column "options" jsonb not null default '{}', add column "confirmed_by" text null;`);
    this.addSql(`create index "runs_configuration_version_idx" on "runs" ("configuration_version_id");`);
    this.addSql(`alter table "api_tokens" add column "created_by" text null;`);
    this.addSql(
      `update "runs" r set "created_by" = case t."kind" when 'admin' then 'user-site-admin' when 'organization' then 'user-api-' || t."organization_id" else 'user-api-' || t."team_id" end from "api_tokens" t where t."id" = r."created_by";`,
    );
    this.addSql(`alter table "configuration_versions" add column "provisional" boolean not null default false;`);
    this.addSql(`alter table "configuration_versions" drop constraint "configuration_versions_status_check";`);
    this.addSql(
      `alter table "configuration_versions" add constraint "configuration_versions_status_check" check ("status" in ('pending', 'uploaded', 'errored', 'archived'));`,
    );
  }

  override down(): void {
    this.addSql(`alter table "configuration_versions" drop constraint "configuration_versions_status_check";`);
    this.addSql(`update "configuration_versions" set "status" = 'errored' where "status" = 'archived';`);
    this.addSql(
      `alter table "configuration_versions" add constraint "configuration_versions_status_check" check ("status" in ('pending', 'uploaded', 'errored'));`,
    );
    this.addSql(`alter table "configuration_versions" drop column "provisional";`);
    this.addSql(`alter table "api_tokens" drop column "created_by";`);
    this.addSql(`drop index if exists "runs_configuration_version_idx";`);
    this.addSql(`alter table "runs" drop column "options", drop column "confirmed_by";`);
  }
}
