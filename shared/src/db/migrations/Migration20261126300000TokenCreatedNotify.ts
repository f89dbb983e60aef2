import { Migration } from '@mikro-orm/migrations';

/**
 * API processes remember for a few seconds the tokens they refused, so a flood of unknown tokens does not
 * reach PostgreSQL on repeat. A token created afterwards must work at once in every process, so creating
 * one NOTIFYs `runtasks_principals` with `token-created`, on which each process forgets the tokens it
 * refused (and keeps the principals it knows: a new token changes none). Declared on the ApiToken entity.
 */
export class Migration20261126300000TokenCreatedNotify extends Migration {
  override up(): void {
    this.addSql(
      `create or replace function "api_tokens_api_tokens_created_fn"() returns trigger as $$ begin perform pg_notify('runtasks_principals', 'token-created'); return null; end; $$ language plpgsql;`,
    );
    this.addSql(
      `create trigger "api_tokens_created" AFTER INSERT on "api_tokens" for each STATEMENT execute function "api_tokens_api_tokens_created_fn"();`,
    );
  }

  override down(): void {
    this.addSql(`drop trigger if exists "api_tokens_created" on "api_tokens";`);
    this.addSql(`drop function if exists "api_tokens_api_tokens_created_fn"();`);
  }
}
