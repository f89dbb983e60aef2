import { Migration } from '@mikro-orm/migrations';

const NOTIFY = `returns trigger as $$ begin perform pg_notify('runtasks_principals', ''); return null; end; $$ language plpgsql;`;
const TABLES = ['users', 'organization_memberships', 'team_memberships'] as const;
const MEMBERSHIP_TRIGGERS = ['organization_memberships', 'team_memberships'].flatMap((table) =>
  (['INSERT', 'DELETE'] as const).map((event) => [table, `member_principal_${event.toLowerCase()}`, event] as const),
);

/**
 * People (docs/design.md, "People"): users, their organization memberships, the teams they are on,
 * and user tokens (`api_tokens.kind = 'user'`). API processes remember a user token's principal (its
 * user's memberships and teams, with their rights): adding or removing a membership or a team
 * membership, a user's site-admin flag changing or a user deleted tells them to forget, as a token's
 * or a team's change does (Migration20261124000000PrincipalNotify). The TRUNCATE triggers are only
 * here, for the reason given there.
 */
export class Migration20261129300000Users extends Migration {
  override up(): void {
    this.addSql(
      `create table "users" ("id" varchar(32) not null, "username" varchar(255) not null, "email" varchar(255) not null, "is_admin" boolean not null default false, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "users" add constraint "users_username_unique" unique ("username");`);
    this.addSql(`alter table "users" add constraint "users_email_unique" unique ("email");`);

    this.addSql(
      `create table "organization_memberships" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "user_id" varchar(32) not null, "status" text not null default 'invited', "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "organization_memberships_user_idx" on "organization_memberships" ("user_id");`);
    this.addSql(
      `alter table "organization_memberships" add constraint "organization_memberships_organization_user_unique" unique ("organization_id", "user_id");`,
    );
    this.addSql(
      `alter table "organization_memberships" add constraint "organization_memberships_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "organization_memberships" add constraint "organization_memberships_user_id_foreign" foreign key ("user_id") references "users" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "organization_memberships" add constraint "organization_memberships_status_check" check ("status" in ('invited', 'active'));`,
    );

    this.addSql(
      `create table "team_memberships" ("team_id" varchar(32) not null, "membership_id" varchar(32) not null, "created_at" timestamptz not null, primary key ("team_id", "membership_id"));`,
    );
    this.addSql(`create index "team_memberships_membership_idx" on "team_memberships" ("membership_id");`);
    this.addSql(
      `alter table "team_memberships" add constraint "team_memberships_team_id_foreign" foreign key ("team_id") references "teams" ("id") on update cascade on delete cascade;`,
    );
    this.addSql(
      `alter table "team_memberships" add constraint "team_memberships_membership_id_foreign" foreign key ("membership_id") references "organization_memberships" ("id") on update cascade on delete cascade;`,
    );

    this.addSql(`alter table "api_tokens" drop constraint "api_tokens_kind_check";`);
    this.addSql(
      `alter table "api_tokens" add constraint "api_tokens_kind_check" check ("kind" in ('admin', 'organization', 'team', 'user'));`,
    );
    this.addSql(`alter table "api_tokens" add "user_id" varchar(32) null;`);
    this.addSql(
      `alter table "api_tokens" add constraint "api_tokens_user_id_foreign" foreign key ("user_id") references "users" ("id") on delete cascade;`,
    );
    this.addSql(`create index "api_tokens_user_idx" on "api_tokens" ("user_id");`);

    for (const fn of [
      'users_users_principal_update_fn',
      'users_users_principal_delete_fn',
      ...MEMBERSHIP_TRIGGERS.map(([table, trigger]) => `${table}_${trigger}_fn`),
      ...TABLES.map((table) => `${table}_principal_truncate_fn`),
    ]) {
      this.addSql(`create or replace function "${fn}"() ${NOTIFY}`);
    }
    this.addSql(
      `create trigger "users_principal_update" AFTER UPDATE on "users" for each ROW when ((old.is_admin <> new.is_admin)) execute function "users_users_principal_update_fn"();`,
    );
    this.addSql(
      `create trigger "users_principal_delete" AFTER DELETE on "users" for each STATEMENT execute function "users_users_principal_delete_fn"();`,
    );
    for (const [table, trigger, event] of MEMBERSHIP_TRIGGERS) {
      this.addSql(
        `create trigger "${trigger}" AFTER ${event} on "${table}" for each STATEMENT execute function "${table}_${trigger}_fn"();`,
      );
    }
    for (const table of TABLES) {
      this.addSql(
        `create trigger "${table}_principal_truncate" after truncate on "${table}" for each statement execute function "${table}_principal_truncate_fn"();`,
      );
    }
  }

  override down(): void {
    this.addSql(`delete from "api_tokens" where "kind" = 'user';`);
    this.addSql(`alter table "api_tokens" drop column "user_id";`);
    this.addSql(`alter table "api_tokens" drop constraint "api_tokens_kind_check";`);
    this.addSql(`alter table "api_tokens" add constraint "api_tokens_kind_check" check ("kind" in ('admin', 'organization', 'team'));`);
    // Dropping the tables drops their triggers; the functions go by name.
    this.addSql(`drop table if exists "team_memberships" cascade;`);
    this.addSql(`drop table if exists "organization_memberships" cascade;`);
    this.addSql(`drop table if exists "users" cascade;`);
    for (const fn of [
      'users_users_principal_update_fn',
      'users_users_principal_delete_fn',
      ...MEMBERSHIP_TRIGGERS.map(([table, trigger]) => `${table}_${trigger}_fn`),
      ...TABLES.map((table) => `${table}_principal_truncate_fn`),
    ]) {
      this.addSql(`drop function if exists "${fn}"();`);
    }
  }
}
