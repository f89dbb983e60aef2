import { Migration } from '@mikro-orm/migrations';

/**
 * Trust rules for CI identity tokens (docs/sso.md, "Pipelines without a stored secret"): a workspace
 * names the issuer, the audience and the claims a CI's token must carry to drive its runs. A rule goes
 * with its workspace; the exchanged tokens are not stored (they are signed, and checked against their
 * rule on every request, so deleting the rule ends them).
 */
export class Migration20261129500000CiTrustRules extends Migration {
  override up(): void {
    this.addSql(
      `create table "ci_trust_rules" ("id" varchar(32) not null, "workspace_id" varchar(32) not null, "issuer" varchar(255) not null, "audience" varchar(255) not null, "claims" jsonb not null, "created_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "ci_trust_rules_workspace_idx" on "ci_trust_rules" ("workspace_id");`);
    this.addSql(
      `alter table "ci_trust_rules" add constraint "ci_trust_rules_workspace_id_foreign" foreign key ("workspace_id") references "workspaces" ("id") on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "ci_trust_rules" cascade;`);
  }
}
