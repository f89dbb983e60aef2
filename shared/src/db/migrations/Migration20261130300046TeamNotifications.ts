import { Migration } from '@mikro-orm/migrations';

/**
 * Team notification configurations (docs/notifications.md): a configuration's subscribable is a
 * workspace or a team, exactly one. Runs' notify triggers keep matching on `workspace_id`, so a team's
 * configurations never receive run events.
 */
export class Migration20261130300046TeamNotifications extends Migration {
  override up(): void {
    this.addSql(`alter table "notification_configurations" alter column "workspace_id" drop not null;`);
    this.addSql(`alter table "notification_configurations" add column "team_id" varchar(32) null;`);
    this.addSql(
      `alter table "notification_configurations" add constraint "notification_configurations_team_id_foreign" foreign key ("team_id") references "teams" ("id") on delete cascade;`,
    );
    this.addSql(`create index "notification_configurations_team_idx" on "notification_configurations" ("team_id", "created_at");`);
    this.addSql(
      `alter table "notification_configurations" add constraint "notification_configurations_subscribable_check" check (((workspace_id IS NULL) <> (team_id IS NULL)));`,
    );
  }

  override down(): void {
    this.addSql(`delete from "notification_configurations" where "team_id" is not null;`);
    this.addSql(`alter table "notification_configurations" drop constraint if exists "notification_configurations_subscribable_check";`);
    this.addSql(`drop index if exists "notification_configurations_team_idx";`);
    this.addSql(`alter table "notification_configurations" drop constraint if exists "notification_configurations_team_id_foreign";`);
    this.addSql(`alter table "notification_configurations" drop column if exists "team_id";`);
    this.addSql(`alter table "notification_configurations" alter column "workspace_id" set not null;`);
  }
}
