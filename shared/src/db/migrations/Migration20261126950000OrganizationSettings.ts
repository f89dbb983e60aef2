import { Migration } from '@mikro-orm/migrations';

/**
 * The organization, team and team access settings go-tfe sends, stored so that what a client sets is
 * what it reads back (see docs/go-tfe.md for which of them the service acts on). Defaults are HCP's.
 * Existing team accesses at a fixed level get the other custom permissions that level implies.
 */
export class Migration20261126950000OrganizationSettings extends Migration {
  override up(): void {
    this.addSql(
      `alter table "organizations"
         add column "default_execution_mode" text not null default 'remote',
         add column "allow_force_delete_workspaces" boolean not null default false,
         add column "assessments_enforced" boolean not null default false,
         add column "collaborator_auth_policy" text not null default 'password',
         add column "cost_estimation_enabled" boolean not null default false,
         add column "send_passing_statuses_for_untriggered_speculative_plans" boolean not null default false,
         add column "aggregated_commit_status_enabled" boolean not null default false,
         add column "speculative_plan_management_enabled" boolean not null default true,
         add column "owners_team_saml_role_id" text null,
         add column "session_remember" int not null default 20160,
         add column "session_timeout" int not null default 20160,
         add column "stacks_enabled" boolean not null default false,
         add column "registry_monorepo_support_enabled" boolean not null default false,
         add column "access_beta_tools" boolean not null default false,
         add column "global_module_sharing" boolean not null default false,
         add column "global_provider_sharing" boolean not null default false,
         add column "terraform_build_worker_apply_timeout" text not null default '24h',
         add column "terraform_build_worker_plan_timeout" text not null default '2h',
         add column "terraform_worker_sudo_enabled" boolean not null default false;`,
    );
    this.addSql(
      `alter table "teams"
         add column "sso_team_id" text null,
         add column "allow_member_token_management" boolean not null default true,
         add column "manage_policies" boolean not null default false,
         add column "manage_vcs_settings" boolean not null default false,
         add column "manage_providers" boolean not null default false,
         add column "manage_modules" boolean not null default false,
         add column "manage_projects" boolean not null default false,
         add column "read_projects" boolean not null default false,
         add column "manage_membership" boolean not null default false,
         add column "manage_teams" boolean not null default false,
         add column "manage_organization_access" boolean not null default false,
         add column "access_secret_teams" boolean not null default false,
         add column "manage_agent_pools" boolean not null default false;`,
    );
    this.addSql(
      `alter table "team_workspaces"
         add column "variables" text not null default 'none',
         add column "state_versions" text not null default 'none',
         add column "sentinel_mocks" text not null default 'none',
         add column "workspace_locking" boolean not null default false;`,
    );
    this.addSql(
      `update "team_workspaces" set
         "variables" = case when "access" in ('write', 'admin') then 'write' else 'read' end,
         "state_versions" = case when "access" in ('write', 'admin') then 'write' else 'read' end,
         "sentinel_mocks" = case when "access" in ('write', 'admin') then 'read' else 'none' end,
         "workspace_locking" = "access" in ('write', 'admin')
       where "access" <> 'custom';`,
    );
  }

  override down(): void {
    this.addSql(
      `alter table "team_workspaces" drop column "variables", drop column "state_versions", drop column "sentinel_mocks", drop column "workspace_locking";`,
    );
    this.addSql(
      `alter table "teams" drop column "sso_team_id", drop column "allow_member_token_management", drop column "manage_policies",
         drop column "manage_vcs_settings", drop column "manage_providers", drop column "manage_modules", drop column "manage_projects",
         drop column "read_projects", drop column "manage_membership", drop column "manage_teams", drop column "manage_organization_access",
         drop column "access_secret_teams", drop column "manage_agent_pools";`,
    );
    this.addSql(
      `alter table "organizations" drop column "default_execution_mode", drop column "allow_force_delete_workspaces",
         drop column "assessments_enforced", drop column "collaborator_auth_policy", drop column "cost_estimation_enabled",
         drop column "send_passing_statuses_for_untriggered_speculative_plans", drop column "aggregated_commit_status_enabled",
         drop column "speculative_plan_management_enabled", drop column "owners_team_saml_role_id", drop column "session_remember",
         drop column "session_timeout", drop column "stacks_enabled", drop column "registry_monorepo_support_enabled",
         drop column "access_beta_tools", drop column "global_module_sharing", drop column "global_provider_sharing",
         drop column "terraform_build_worker_apply_timeout", drop column "terraform_build_worker_plan_timeout",
         drop column "terraform_worker_sudo_enabled";`,
    );
  }
}
