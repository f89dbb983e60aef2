import { Migration } from '@mikro-orm/migrations';

/**
 * API processes remember the principal of a token (services/api/src/auth/principal-cache.ts) and must
 * forget it as soon as it may have changed, in every process. These triggers NOTIFY on
 * `runtasks_principals` after any change that can alter a principal, whoever makes it (the API, the
 * CLI, an operator's SQL, a cascade): a token revoked, expiring, deleted or rebound; a team's
 * permissions or organization changed; either table truncated. Recording a use (last_used_at) is no
 * change. The triggers are declared on the ApiToken and Team entities; this is their DDL. The two
 * TRUNCATE triggers are only here: MikroORM reads triggers from information_schema, which leaves
 * TRUNCATE triggers out, so it neither sees nor declares them (and its schema comparison ignores them).
 */
export class Migration20261124000000PrincipalNotify extends Migration {
  override up(): void {
    const notify = `returns trigger as $$ begin perform pg_notify('runtasks_principals', ''); return null; end; $$ language plpgsql;`;
    for (const fn of [
      'api_tokens_api_tokens_principal_update_fn',
      'api_tokens_api_tokens_principal_delete_fn',
      'teams_teams_principal_update_fn',
      'teams_teams_principal_delete_fn',
      'api_tokens_principal_truncate_fn',
      'teams_principal_truncate_fn',
    ]) {
      this.addSql(`create or replace function "${fn}"() ${notify}`);
    }
    this.addSql(
      `create trigger "api_tokens_principal_update" AFTER UPDATE on "api_tokens" for each ROW when (((old.kind <> new.kind) OR ((old.token_hash)::text <> (new.token_hash)::text) OR ((old.organization_id)::text IS DISTINCT FROM (new.organization_id)::text) OR ((old.team_id)::text IS DISTINCT FROM (new.team_id)::text) OR (old.expires_at IS DISTINCT FROM new.expires_at) OR (old.revoked_at IS DISTINCT FROM new.revoked_at))) execute function "api_tokens_api_tokens_principal_update_fn"();`,
    );
    this.addSql(
      `create trigger "api_tokens_principal_delete" AFTER DELETE on "api_tokens" for each STATEMENT execute function "api_tokens_api_tokens_principal_delete_fn"();`,
    );
    this.addSql(
      `create trigger "teams_principal_update" AFTER UPDATE on "teams" for each ROW when ((((old.organization_id)::text <> (new.organization_id)::text) OR (old.manage_run_tasks <> new.manage_run_tasks) OR (old.manage_workspaces <> new.manage_workspaces) OR (old.manage_policy_overrides <> new.manage_policy_overrides))) execute function "teams_teams_principal_update_fn"();`,
    );
    this.addSql(
      `create trigger "teams_principal_delete" AFTER DELETE on "teams" for each STATEMENT execute function "teams_teams_principal_delete_fn"();`,
    );
    for (const table of ['api_tokens', 'teams']) {
      this.addSql(
        `create trigger "${table}_principal_truncate" after truncate on "${table}" for each statement execute function "${table}_principal_truncate_fn"();`,
      );
    }
  }

  override down(): void {
    for (const table of ['api_tokens', 'teams']) {
      this.addSql(`drop trigger if exists "${table}_principal_truncate" on "${table}";`);
      this.addSql(`drop function if exists "${table}_principal_truncate_fn"();`);
    }
    for (const [table, trigger] of [
      ['teams', 'teams_principal_delete'],
      ['teams', 'teams_principal_update'],
      ['api_tokens', 'api_tokens_principal_delete'],
      ['api_tokens', 'api_tokens_principal_update'],
    ] as const) {
      this.addSql(`drop trigger if exists "${trigger}" on "${table}";`);
      this.addSql(`drop function if exists "${table}_${trigger}_fn"();`);
    }
  }
}
