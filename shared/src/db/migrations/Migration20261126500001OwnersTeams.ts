import { Migration } from '@mikro-orm/migrations';

/**
 * Every organization has an `owners` team, as in HCP: its token acts with owner rights (go-tfe and the
 * Terraform provider create one), it cannot be renamed or deleted, and it counts in the team list.
 * Teams also get HCP's `visibility`, `secret` unless set. Existing organizations get their owners team
 * here, except one that already has a team named `owners`: that team was made by someone without
 * meaning owner rights, so it is left as it is (and that organization has no owners team).
 */
export class Migration20261126500001OwnersTeams extends Migration {
  override up(): void {
    this.addSql(`alter table "teams" add column "is_owners" boolean not null default false;`);
    this.addSql(
      `alter table "teams" add column "visibility" text check ("visibility" in ('secret', 'organization')) not null default 'secret';`,
    );
    // A team id is `team-` and 16 characters of [A-Za-z0-9]; hexadecimal digits are among them.
    this.addSql(
      `insert into "teams" ("id", "organization_id", "name", "manage_run_tasks", "manage_workspaces", "manage_policy_overrides", "is_owners", "created_at", "updated_at")
       select 'team-' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16), o."id", 'owners', true, true, true, true, now(), now()
         from "organizations" o
        where not exists (select 1 from "teams" t where t."organization_id" = o."id" and t."name" = 'owners');`,
    );
  }

  override down(): void {
    this.addSql(`delete from "teams" where "is_owners";`);
    this.addSql(`alter table "teams" drop column "visibility";`);
    this.addSql(`alter table "teams" drop column "is_owners";`);
  }
}
