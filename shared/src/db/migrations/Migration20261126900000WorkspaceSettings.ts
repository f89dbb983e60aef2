import { Migration } from '@mikro-orm/migrations';

/**
 * The workspace settings go-tfe sets and reads, each with HCP's default, so that a setting a client
 * sends is stored and returned instead of being dropped. Trigger lists are jsonb arrays of text.
 */
export class Migration20261126900000WorkspaceSettings extends Migration {
  override up(): void {
    this.addSql(
      `alter table "workspaces"
         add column "allow_destroy_plan" boolean not null default true,
         add column "assessments_enabled" boolean not null default false,
         add column "auto_apply_run_trigger" boolean not null default false,
         add column "auto_destroy_at" timestamptz null,
         add column "auto_destroy_activity_duration" text null,
         add column "inherits_project_auto_destroy" boolean not null default true,
         add column "file_triggers_enabled" boolean not null default true,
         add column "global_remote_state" boolean not null default false,
         add column "queue_all_runs" boolean not null default false,
         add column "speculative_enabled" boolean not null default true,
         add column "structured_run_output_enabled" boolean not null default true,
         add column "source_name" text null,
         add column "source_url" text null,
         add column "trigger_prefixes" jsonb not null default '[]',
         add column "trigger_patterns" jsonb not null default '[]',
         add column "overwrites_execution_mode" boolean not null default false,
         add column "overwrites_agent_pool" boolean not null default false;`,
    );
  }

  override down(): void {
    this.addSql(
      `alter table "workspaces" drop column "allow_destroy_plan", drop column "assessments_enabled",
         drop column "auto_apply_run_trigger", drop column "auto_destroy_at", drop column "auto_destroy_activity_duration",
         drop column "inherits_project_auto_destroy", drop column "file_triggers_enabled", drop column "global_remote_state",
         drop column "queue_all_runs", drop column "speculative_enabled", drop column "structured_run_output_enabled",
         drop column "source_name", drop column "source_url", drop column "trigger_prefixes", drop column "trigger_patterns",
         drop column "overwrites_execution_mode", drop column "overwrites_agent_pool";`,
    );
  }
}
