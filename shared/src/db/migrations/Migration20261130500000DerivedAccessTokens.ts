import { Migration } from '@mikro-orm/migrations';

/**
 * Task results planned from now on store no access token: theirs is derived from the result's id under
 * the server's secret (shared/src/security/secrets.ts, `deriveToken`), so their rows carry neither the
 * hash nor the encrypted copy. A plain unique index would still hold an entry for each of their nulls;
 * keeping only the stored hashes (those of results planned before, looked up by the plan JSON's access
 * check) saves an index entry per result written. Existing tokens keep working: their hashes stay indexed.
 */
export class Migration20261130500000DerivedAccessTokens extends Migration {
  override up(): void {
    this.addSql(
      `create unique index "task_results_callback_token_hash_stored" on "task_results" ("callback_token_hash") where "callback_token_hash" is not null;`,
    );
    this.addSql(`alter table "task_results" drop constraint if exists "task_results_callback_token_hash_unique";`);
    this.addSql(`drop index if exists "task_results_callback_token_hash_unique";`);
  }

  override down(): void {
    this.addSql(`alter table "task_results" add constraint "task_results_callback_token_hash_unique" unique ("callback_token_hash");`);
    this.addSql(`drop index "task_results_callback_token_hash_stored";`);
  }
}
