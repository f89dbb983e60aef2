import { Migration } from '@mikro-orm/migrations';
import { RUN_NOTIFY_TRIGGER_BODY } from '../../engine/notification-trigger.ts';

/**
 * Notifications (docs/notifications.md): a workspace's notification configurations, the deliveries
 * decided for them (one per configuration, run, trigger and occasion: the unique key), and the runs'
 * triggers that record a run's creation and status changes in the outbox when its workspace has an
 * enabled configuration. Both triggers use the same body; the function is written as PostgreSQL prints it.
 */
export class Migration20261129600000Notifications extends Migration {
  override up(): void {
    this.addSql(
      `create table "notification_configurations" ("id" varchar(32) not null, "workspace_id" varchar(32) not null, "name" text not null, "destination_type" text not null, "url" text null, "token_encrypted" text null, "enabled" boolean not null default false, "triggers" jsonb not null, "email_addresses" jsonb not null, "email_user_ids" jsonb not null, "delivery_responses" jsonb not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(
      `create index "notification_configurations_workspace_idx" on "notification_configurations" ("workspace_id", "created_at");`,
    );
    this.addSql(
      `create table "notification_deliveries" ("id" varchar(32) not null, "configuration_id" varchar(32) not null, "run_id" varchar(32) not null, "trigger" text not null, "occasion" text not null, "message" text not null, "run_status" text not null, "run_updated_at" timestamptz not null, "status" text not null, "attempts" int not null default 0, "due_at" timestamptz not null, "last_error" text null, "delivered_at" timestamptz null, "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "notification_deliveries_due_idx" on "notification_deliveries" ("due_at") where "status" = 'pending';`);
    this.addSql(`create index "notification_deliveries_run_idx" on "notification_deliveries" ("run_id");`);
    this.addSql(
      `alter table "notification_deliveries" add constraint "notification_deliveries_key_unique" unique ("configuration_id", "run_id", "trigger", "occasion");`,
    );
    this.addSql(
      `alter table "notification_configurations" add constraint "notification_configurations_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "notification_deliveries" add constraint "notification_deliveries_configuration_id_foreign" foreign key ("configuration_id") references "notification_configurations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "notification_deliveries" add constraint "notification_deliveries_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade;`,
    );
    for (const name of ['runs_notify_created', 'runs_notify_status']) {
      this.addSql(
        `create or replace function "runs_${name}_fn"() returns trigger as $$ begin ${RUN_NOTIFY_TRIGGER_BODY} end; $$ language plpgsql;`,
      );
    }
    this.addSql(
      `create trigger "runs_notify_created" AFTER INSERT on "runs" for each ROW execute function "runs_runs_notify_created_fn"();`,
    );
    this.addSql(
      `create trigger "runs_notify_status" AFTER UPDATE on "runs" for each ROW when (((old.status)::text IS DISTINCT FROM (new.status)::text)) execute function "runs_runs_notify_status_fn"();`,
    );
  }

  override down(): void {
    this.addSql(`drop trigger if exists "runs_notify_created" on "runs";`);
    this.addSql(`drop trigger if exists "runs_notify_status" on "runs";`);
    this.addSql(`drop function if exists "runs_runs_notify_created_fn"();`);
    this.addSql(`drop function if exists "runs_runs_notify_status_fn"();`);
    this.addSql(`drop table if exists "notification_deliveries" cascade;`);
    this.addSql(`drop table if exists "notification_configurations" cascade;`);
  }
}
