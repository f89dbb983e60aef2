import { Migration } from '@mikro-orm/migrations';

/**
 * Sessions of the run pages (people signed in with an API token in a browser). Each row holds a keyed
 * hash of the session id, never the id, and belongs to its token: deleting the token deletes them, and
 * the lookup ignores the sessions of a revoked or expired token.
 */
export class Migration20261126400000PageSessions extends Migration {
  override up(): void {
    this.addSql(
      `create table "page_sessions" ("id_hash" varchar(64) not null, "token_id" varchar(32) not null, "created_at" timestamptz not null, "expires_at" timestamptz not null, primary key ("id_hash"));`,
    );
    this.addSql(`create index "page_sessions_token_idx" on "page_sessions" ("token_id");`);
    this.addSql(`create index "page_sessions_expires_idx" on "page_sessions" ("expires_at");`);
    this.addSql(
      `alter table "page_sessions" add constraint "page_sessions_token_id_foreign" foreign key ("token_id") references "api_tokens" ("id") on delete cascade;`,
    );
  }

  override down(): void {
    this.addSql(`drop table if exists "page_sessions" cascade;`);
  }
}
