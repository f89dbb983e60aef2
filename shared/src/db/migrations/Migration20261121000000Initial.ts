import { Migration } from '@mikro-orm/migrations';

/** The initial schema: every table of the seed, with the unique constraints that make stages and results exist once. */
export class Migration20261121000000Initial extends Migration {
  override up(): void {
    this.addSql(
      `create table "organizations" ("id" varchar(32) not null, "name" varchar(40) not null, "email" text not null, "edition" text not null default 'standard', "task_overrides_enabled" boolean not null default false, "global_run_tasks_enabled" boolean not null default true, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "organizations" add constraint "organizations_name_unique" unique ("name");`);
    this.addSql(`alter table "organizations" add constraint "organizations_edition_check" check ("edition" in ('free', 'standard'));`);
    this.addSql(
      `create table "outbox_events" ("id" bigserial primary key, "topic" varchar(64) not null, "aggregate_id" varchar(32) not null, "payload" jsonb not null, "created_at" timestamptz not null, "published_at" timestamptz null, "publish_attempts" int not null default 0);`,
    );
    this.addSql(`create index "outbox_events_unpublished_idx" on "outbox_events" ("id") where "published_at" is null;`);
    this.addSql(
      `create table "run_tasks" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "name" varchar(255) not null, "url" text not null, "description" text null, "category" varchar(32) not null default 'task', "hmac_key_encrypted" text null, "enabled" boolean not null default true, "global_enabled" boolean not null default false, "global_stages" text[] not null default '{}', "global_enforcement_level" text not null default 'advisory', "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "run_tasks" add constraint "run_tasks_organization_name_unique" unique ("organization_id", "name");`);
    this.addSql(
      `alter table "run_tasks" add constraint "run_tasks_global_enforcement_level_check" check ("global_enforcement_level" in ('advisory', 'mandatory'));`,
    );
    this.addSql(
      `create table "teams" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "name" varchar(255) not null, "manage_run_tasks" boolean not null default false, "manage_workspaces" boolean not null default false, "manage_policy_overrides" boolean not null default false, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "teams" add constraint "teams_organization_name_unique" unique ("organization_id", "name");`);
    this.addSql(
      `create table "api_tokens" ("id" varchar(32) not null, "kind" text not null, "organization_id" varchar(32) null, "team_id" varchar(32) null, "token_hash" varchar(64) not null, "description" text null, "created_at" timestamptz not null, "expires_at" timestamptz null, "revoked_at" timestamptz null, "last_used_at" timestamptz null, primary key ("id"));`,
    );
    this.addSql(`alter table "api_tokens" add constraint "api_tokens_token_hash_unique" unique ("token_hash");`);
    this.addSql(`create index "api_tokens_organization_idx" on "api_tokens" ("organization_id");`);
    this.addSql(`create index "api_tokens_team_idx" on "api_tokens" ("team_id");`);
    this.addSql(`alter table "api_tokens" add constraint "api_tokens_kind_check" check ("kind" in ('admin', 'organization', 'team'));`);
    this.addSql(
      `create table "workspaces" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "name" varchar(90) not null, "description" text null, "auto_apply" boolean not null default false, "working_directory" text not null default '', "terraform_version" varchar(32) not null default '1.9.0', "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "workspaces" add constraint "workspaces_organization_name_unique" unique ("organization_id", "name");`);
    this.addSql(
      `create table "team_workspaces" ("id" varchar(32) not null, "team_id" varchar(32) not null, "workspace_id" varchar(32) not null, "access" text not null default 'custom', "runs" text not null default 'read', "run_tasks" boolean not null default false, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "team_workspaces_workspace_idx" on "team_workspaces" ("workspace_id");`);
    this.addSql(`alter table "team_workspaces" add constraint "team_workspaces_team_workspace_unique" unique ("team_id", "workspace_id");`);
    this.addSql(
      `alter table "team_workspaces" add constraint "team_workspaces_access_check" check ("access" in ('read', 'plan', 'write', 'admin', 'custom'));`,
    );
    this.addSql(`alter table "team_workspaces" add constraint "team_workspaces_runs_check" check ("runs" in ('read', 'plan', 'apply'));`);
    this.addSql(
      `create table "runs" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "workspace_id" varchar(32) not null, "plan_id" varchar(32) not null, "status" text not null default 'pending', "status_timestamps" jsonb not null default '{}', "message" text not null default '', "is_destroy" boolean not null default false, "plan_only" boolean not null default false, "auto_apply" boolean not null default false, "has_task_warnings" boolean not null default false, "created_by" text null, "configuration_version_id" varchar(32) null, "plan_json" jsonb null, "version" int not null default 1, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "runs" add constraint "runs_plan_id_unique" unique ("plan_id");`);
    this.addSql(`create index "runs_workspace_created_idx" on "runs" ("workspace_id", "created_at");`);
    this.addSql(`create index "runs_status_idx" on "runs" ("status");`);
    this.addSql(
      `alter table "runs" add constraint "runs_status_check" check ("status" in ('pending', 'pre_plan_running', 'pre_plan_completed', 'pre_plan_awaiting_decision', 'planning', 'planned', 'post_plan_running', 'post_plan_completed', 'post_plan_awaiting_decision', 'confirmed', 'pre_apply_running', 'pre_apply_completed', 'pre_apply_awaiting_decision', 'applying', 'applied', 'post_apply_running', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled'));`,
    );
    this.addSql(
      `create table "task_stages" ("id" varchar(32) not null, "run_id" varchar(32) not null, "stage" text not null, "status" text not null default 'pending', "status_timestamps" jsonb not null default '{}', "version" int not null default 1, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "task_stages" add constraint "task_stages_run_stage_unique" unique ("run_id", "stage");`);
    this.addSql(
      `alter table "task_stages" add constraint "task_stages_stage_check" check ("stage" in ('pre_plan', 'post_plan', 'pre_apply', 'post_apply'));`,
    );
    this.addSql(
      `alter table "task_stages" add constraint "task_stages_status_check" check ("status" in ('pending', 'running', 'passed', 'failed', 'awaiting_override', 'errored', 'canceled', 'unreachable'));`,
    );
    this.addSql(
      `create table "task_results" ("id" varchar(32) not null, "task_stage_id" varchar(32) not null, "task_id" varchar(32) not null, "workspace_task_id" varchar(32) null, "task_name" varchar(255) not null, "task_url" text not null, "hmac_key_encrypted" text null, "enforcement_level" text not null, "stage" text not null, "is_speculative" boolean not null default false, "status" text not null default 'pending', "status_timestamps" jsonb not null default '{}', "message" text null, "url" text null, "callback_token_hash" varchar(64) null, "progress_deadline" timestamptz null, "hard_deadline" timestamptz null, "attempts" int not null default 0, "outcomes_count" int not null default 0, "version" int not null default 1, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`alter table "task_results" add constraint "task_results_callback_token_hash_unique" unique ("callback_token_hash");`);
    this.addSql(`create index "task_results_status_deadline_idx" on "task_results" ("status", "progress_deadline");`);
    this.addSql(`alter table "task_results" add constraint "task_results_stage_task_unique" unique ("task_stage_id", "task_id");`);
    this.addSql(
      `alter table "task_results" add constraint "task_results_stage_workspace_task_unique" unique ("task_stage_id", "workspace_task_id");`,
    );
    this.addSql(
      `alter table "task_results" add constraint "task_results_enforcement_level_check" check ("enforcement_level" in ('advisory', 'mandatory'));`,
    );
    this.addSql(
      `alter table "task_results" add constraint "task_results_stage_check" check ("stage" in ('pre_plan', 'post_plan', 'pre_apply', 'post_apply'));`,
    );
    this.addSql(
      `alter table "task_results" add constraint "task_results_status_check" check ("status" in ('pending', 'running', 'passed', 'failed', 'errored', 'canceled', 'unreachable'));`,
    );
    this.addSql(
      `create table "task_result_outcomes" ("id" varchar(32) not null, "task_result_id" varchar(32) not null, "outcome_id" varchar(255) not null, "description" text null, "body" text null, "url" text null, "tags" jsonb not null default '{}', "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "task_result_outcomes_result_idx" on "task_result_outcomes" ("task_result_id");`);
    this.addSql(
      `create table "delivery_attempts" ("id" bigserial primary key, "task_result_id" varchar(32) not null, "attempt" int not null, "started_at" timestamptz not null, "duration_ms" int not null, "http_status" int null, "error_kind" varchar(64) null, "response_excerpt" text null);`,
    );
    this.addSql(
      `alter table "delivery_attempts" add constraint "delivery_attempts_result_attempt_unique" unique ("task_result_id", "attempt");`,
    );
    this.addSql(
      `create table "workspace_tasks" ("id" varchar(32) not null, "workspace_id" varchar(32) not null, "task_id" varchar(32) not null, "enforcement_level" text not null, "stages" text[] not null, "created_at" timestamptz not null, "updated_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "workspace_tasks_task_idx" on "workspace_tasks" ("task_id");`);
    this.addSql(`alter table "workspace_tasks" add constraint "workspace_tasks_workspace_task_unique" unique ("workspace_id", "task_id");`);
    this.addSql(
      `alter table "workspace_tasks" add constraint "workspace_tasks_enforcement_level_check" check ("enforcement_level" in ('advisory', 'mandatory'));`,
    );
    this.addSql(
      `alter table "run_tasks" add constraint "run_tasks_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "teams" add constraint "teams_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "api_tokens" add constraint "api_tokens_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "api_tokens" add constraint "api_tokens_team_id_foreign" foreign key ("team_id") references "teams" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "workspaces" add constraint "workspaces_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "team_workspaces" add constraint "team_workspaces_team_id_foreign" foreign key ("team_id") references "teams" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "team_workspaces" add constraint "team_workspaces_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "runs" add constraint "runs_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "runs" add constraint "runs_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "task_stages" add constraint "task_stages_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "task_results" add constraint "task_results_task_stage_id_foreign" foreign key ("task_stage_id") references "task_stages" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "task_result_outcomes" add constraint "task_result_outcomes_task_result_id_foreign" foreign key ("task_result_id") references "task_results" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "delivery_attempts" add constraint "delivery_attempts_task_result_id_foreign" foreign key ("task_result_id") references "task_results" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "workspace_tasks" add constraint "workspace_tasks_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "workspace_tasks" add constraint "workspace_tasks_task_id_foreign" foreign key ("task_id") references "run_tasks" ("id") on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "delivery_attempts" cascade;`);
    this.addSql(`drop table if exists "task_result_outcomes" cascade;`);
    this.addSql(`drop table if exists "task_results" cascade;`);
    this.addSql(`drop table if exists "task_stages" cascade;`);
    this.addSql(`drop table if exists "runs" cascade;`);
    this.addSql(`drop table if exists "workspace_tasks" cascade;`);
    this.addSql(`drop table if exists "team_workspaces" cascade;`);
    this.addSql(`drop table if exists "api_tokens" cascade;`);
    this.addSql(`drop table if exists "teams" cascade;`);
    this.addSql(`drop table if exists "run_tasks" cascade;`);
    this.addSql(`drop table if exists "workspaces" cascade;`);
    this.addSql(`drop table if exists "outbox_events" cascade;`);
    this.addSql(`drop table if exists "organizations" cascade;`);
  }
}
