import { Migration } from '@mikro-orm/migrations';

/**
 * Workspace tags, as HCP Terraform has them: tags belong to an organization (one name each) and are
 * linked to its workspaces. Deleting a workspace, a tag or the organization removes the links.
 */
export class Migration20261127100000WorkspaceTags extends Migration {
  override up(): void {
    this.addSql(
      `create table "tags" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "name" varchar(255) not null, "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "tags" add constraint "tags_organization_name_unique" unique ("organization_id", "name");`);
    this.addSql(
      `alter table "tags" add constraint "tags_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `create table "workspace_tags" ("workspace_id" varchar(32) not null, "tag_id" varchar(32) not null, "created_at" timestamptz not null, primary key ("workspace_id", "tag_id"));`,
    );
    this.addSql(`create index "workspace_tags_tag_idx" on "workspace_tags" ("tag_id");`);
    this.addSql(
      `alter table "workspace_tags" add constraint "workspace_tags_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "workspace_tags" add constraint "workspace_tags_tag_id_foreign" foreign key ("tag_id") references "tags" ("id") on update cascade on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "workspace_tags" cascade;`);
    this.addSql(`drop table if exists "tags" cascade;`);
  }
}
