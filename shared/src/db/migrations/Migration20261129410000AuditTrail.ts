import { Migration } from '@mikro-orm/migrations';

/**
 * An organization's audit trail (HCP's): who did what to which resource, when, from where; kept for
 * AUDIT_TRAIL_RETENTION_DAYS and pruned by the worker. No foreign key to the organization: the trail is
 * history. And the organization's audit trail token (one per organization), which reads the trail and
 * nothing else: kept apart from api_tokens, so no other authentication ever finds it.
 */
export class Migration20261129410000AuditTrail extends Migration {
  override up(): void {
    this.addSql(
      `create table "audit_events" ("id" uuid not null, "organization_id" varchar(32) not null, "timestamp" timestamptz not null, "actor_id" text null, "actor_description" text null, "auth_type" text not null, "request_id" text null, "resource_type" text not null, "resource_id" text not null, "action" text not null, "meta" jsonb null, "client_address" text null, primary key ("id"));`,
    );
    this.addSql(`create index "audit_events_organization_idx" on "audit_events" ("organization_id", "timestamp", "id");`);
    this.addSql(`create index "audit_events_timestamp_idx" on "audit_events" ("timestamp");`);
    this.addSql(
      `create table "audit_trail_tokens" ("id" varchar(32) not null, "organization_id" varchar(32) not null, "token_hash" varchar(64) not null, "description" text null, "created_by" text null, "created_at" timestamptz not null, "expires_at" timestamptz null, "last_used_at" timestamptz null, primary key ("id"));`,
    );
    this.addSql(`alter table "audit_trail_tokens" add constraint "audit_trail_tokens_organization_id_unique" unique ("organization_id");`);
    this.addSql(`alter table "audit_trail_tokens" add constraint "audit_trail_tokens_token_hash_unique" unique ("token_hash");`);
    this.addSql(
      `alter table "audit_trail_tokens" add constraint "audit_trail_tokens_organization_id_foreign" foreign key ("organization_id") references "organizations" ("id") on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "audit_trail_tokens" cascade;`);
    this.addSql(`drop table if exists "audit_events" cascade;`);
  }
}
