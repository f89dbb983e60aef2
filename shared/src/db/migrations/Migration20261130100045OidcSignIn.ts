import { Migration } from '@mikro-orm/migrations';

/**
 * Single sign-on to the run pages with OpenID Connect (docs/sso.md, "People signing in to the run
 * pages"). A page session is now for an API token or for a person signed in through the identity
 * provider (exactly one of the two); a person's identity at an issuer (its `sub`) names their user;
 * a sign-in under way keeps its state, nonce and PKCE verifier, bound to the browser by a cookie,
 * until the provider sends the browser back; an organization may name which values of the teams claim
 * stand for which of its teams.
 */
export class Migration20261130100045OidcSignIn extends Migration {
  override up(): void {
    this.addSql(`alter table "page_sessions" alter column "token_id" drop not null;`);
    this.addSql(`alter table "page_sessions" add "user_id" varchar(32) null;`);
    this.addSql(
      `alter table "page_sessions" add constraint "page_sessions_user_id_foreign" foreign key ("user_id") references "users" ("id") on delete cascade;`,
    );
    this.addSql(`create index "page_sessions_user_idx" on "page_sessions" ("user_id");`);
    this.addSql(
      `alter table "page_sessions" add constraint "page_sessions_subject_check" check (("token_id" is null) <> ("user_id" is null));`,
    );

    this.addSql(
      `create table "user_identities" ("issuer" text not null, "subject" text not null, "user_id" varchar(32) not null, "created_at" timestamptz not null, primary key ("issuer", "subject"));`,
    );
    this.addSql(`create index "user_identities_user_idx" on "user_identities" ("user_id");`);
    this.addSql(
      `alter table "user_identities" add constraint "user_identities_user_id_foreign" foreign key ("user_id") references "users" ("id") on delete cascade;`,
    );

    this.addSql(
      `create table "oidc_sign_ins" ("id_hash" varchar(64) not null, "state" text not null, "nonce" text not null, "code_verifier" text not null, "next" text null, "expires_at" timestamptz not null, primary key ("id_hash"));`,
    );
    this.addSql(`create index "oidc_sign_ins_expires_idx" on "oidc_sign_ins" ("expires_at");`);

    this.addSql(`alter table "organizations" add "sso_team_mapping" jsonb null;`);
  }

  override down(): void {
    this.addSql(`alter table "organizations" drop column if exists "sso_team_mapping";`);
    this.addSql(`drop table if exists "oidc_sign_ins" cascade;`);
    this.addSql(`drop table if exists "user_identities" cascade;`);
    this.addSql(`delete from "page_sessions" where "token_id" is null;`);
    this.addSql(`alter table "page_sessions" drop constraint if exists "page_sessions_subject_check";`);
    this.addSql(`alter table "page_sessions" drop column if exists "user_id";`);
    this.addSql(`alter table "page_sessions" alter column "token_id" set not null;`);
  }
}
