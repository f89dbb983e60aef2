import { Migration } from '@mikro-orm/migrations';

/** Configuration versions and their archives (stored in PostgreSQL, deleted with their workspace). */
export class Migration20261121020000ConfigurationVersions extends Migration {
  override up(): void {
    this.addSql(
      `create table "configuration_versions" ("id" varchar(32) not null, "workspace_id" varchar(32) not null, "status" text not null default 'pending', "status_timestamps" jsonb not null default '{}', "error_message" text null, "auto_queue_runs" boolean not null default true, "speculative" boolean not null default false, "upload_token_hash" varchar(64) null, "upload_expires_at" timestamptz null, "archive" bytea null, "archive_size" int null, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(
      `alter table "configuration_versions" add constraint "configuration_versions_upload_token_hash_unique" unique ("upload_token_hash");`,
    );
    this.addSql(`create index "configuration_versions_workspace_created_idx" on "configuration_versions" ("workspace_id", "created_at");`);
    this.addSql(
      `alter table "configuration_versions" add constraint "configuration_versions_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "configuration_versions" add constraint "configuration_versions_status_check" check ("status" in ('pending', 'uploaded', 'errored'));`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "configuration_versions" cascade;`);
  }
}
