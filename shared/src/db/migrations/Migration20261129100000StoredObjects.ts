import { Migration } from '@mikro-orm/migrations';

/**
 * Archives and reported plans as stored objects (shared/src/storage): metadata in `stored_objects`
 * whichever backend holds the bytes, and the bytes in `stored_object_chunks` for the PostgreSQL backend,
 * a chunk a row, so they are written and read a chunk at a time. The archives kept in the
 * `configuration_versions.archive` column move into objects of one chunk each (read as any other).
 */
export class Migration20261129100000StoredObjects extends Migration {
  override up(): void {
    this.addSql(
      `create table "stored_objects" ("key" text not null, "organization_id" varchar(32) not null, "workspace_id" varchar(32) not null, "kind" text not null, "size" bigint not null default 0, "sha256" text null, "complete" boolean not null default false, "created_at" timestamptz not null, primary key ("key"));`,
    );
    this.addSql(`create index "stored_objects_organization_idx" on "stored_objects" ("organization_id", "complete");`);
    this.addSql(`create index "stored_objects_workspace_idx" on "stored_objects" ("workspace_id");`);
    this.addSql(
      `alter table "stored_objects" add constraint "stored_objects_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "stored_objects" add constraint "stored_objects_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
    this.addSql(
      `create table "stored_object_chunks" ("object_key" text not null, "seq" int not null, "data" bytea not null, primary key ("object_key", "seq"));`,
    );
    this.addSql(
      `alter table "stored_object_chunks" add constraint "stored_object_chunks_object_key_foreign" foreign key ("object_key") references "stored_objects" ("key") on delete cascade;`,
    );
    this.addSql(`alter table "configuration_versions" add column "archive_key" text null;`);
    this.addSql(`create index "configuration_versions_archive_idx" on "configuration_versions" ("archive_key");`);
    this.addSql(
      `alter table "configuration_versions" add constraint "configuration_versions_archive_key_foreign" foreign key ("archive_key") references "stored_objects" ("key") on delete set null;`,
    );
    this.addSql(`alter table "runs" add column "plan_object_key" text null;`);
    this.addSql(`create index "runs_plan_object_idx" on "runs" ("plan_object_key");`);
    this.addSql(
      `alter table "runs" add constraint "runs_plan_object_key_foreign" foreign key ("plan_object_key") references "stored_objects" ("key") on delete set null;`,
    );
    this.addSql(
      `insert into "stored_objects" ("key", "organization_id", "workspace_id", "kind", "size", "sha256", "complete", "created_at")
       select 'archive/' || cv.id, w.organization_id, cv.workspace_id, 'configuration-archive', length(cv.archive), encode(sha256(cv.archive), 'hex'), true, cv.updated_at
         from "configuration_versions" cv join "workspaces" w on w.id = cv.workspace_id where cv.archive is not null;`,
    );
    this.addSql(
      `insert into "stored_object_chunks" ("object_key", "seq", "data") select 'archive/' || id, 0, archive from "configuration_versions" where archive is not null;`,
    );
    this.addSql(`update "configuration_versions" set "archive_key" = 'archive/' || id where archive is not null;`);
    this.addSql(`alter table "configuration_versions" drop column "archive";`);
  }

  override down(): void {
    this.addSql(`alter table "configuration_versions" add column "archive" bytea null;`);
    this.addSql(
      `update "configuration_versions" cv set "archive" = (select string_agg(c.data, ''::bytea order by c.seq) from "stored_object_chunks" c where c.object_key = cv.archive_key) where cv.archive_key is not null;`,
    );
    this.addSql(`alter table "runs" drop constraint "runs_plan_object_key_foreign";`);
    this.addSql(`drop index "runs_plan_object_idx";`);
    this.addSql(`alter table "runs" drop column "plan_object_key";`);
    this.addSql(`alter table "configuration_versions" drop constraint "configuration_versions_archive_key_foreign";`);
    this.addSql(`drop index "configuration_versions_archive_idx";`);
    this.addSql(`alter table "configuration_versions" drop column "archive_key";`);
    this.addSql(`drop table "stored_object_chunks";`);
    this.addSql(`drop table "stored_objects";`);
  }
}
