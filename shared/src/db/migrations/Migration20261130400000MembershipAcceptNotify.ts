import { Migration } from '@mikro-orm/migrations';

const NOTIFY = `returns trigger as $$ begin perform pg_notify('runtasks_principals', ''); return null; end; $$ language plpgsql;`;

/**
 * An invited organization membership grants nothing until its user accepts it (docs/api.md, "People"):
 * a user token's principal is made of `active` memberships only. Accepting one (its `status` changing)
 * so changes a principal, and must tell API processes to forget what they remember, as adding or
 * removing a membership does (Migration20261129300000Users).
 */
export class Migration20261130400000MembershipAcceptNotify extends Migration {
  override up(): void {
    this.addSql(`create or replace function "organization_memberships_member_principal_update_fn"() ${NOTIFY}`);
    this.addSql(
      `create trigger "member_principal_update" AFTER UPDATE on "organization_memberships" for each ROW when ((old.status <> new.status)) execute function "organization_memberships_member_principal_update_fn"();`,
    );
  }

  override down(): void {
    this.addSql(`drop trigger if exists "member_principal_update" on "organization_memberships";`);
    this.addSql(`drop function if exists "organization_memberships_member_principal_update_fn"();`);
  }
}
