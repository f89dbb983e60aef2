import { Migration } from '@mikro-orm/migrations';

/**
 * API processes hold the keyed hashes of the active tokens in memory (services/api/src/auth/active-tokens.ts),
 * and now also those of the task results that store an access token (planned before tokens were derived,
 * Migration20261130500000DerivedAccessTokens), so that a callback or plan JSON read with a token that is
 * neither derived nor stored costs no lookup. A stored token written after a process loaded the set (by an
 * earlier version during an upgrade) must reach it: such a write NOTIFYs `token-created`, as a new API token
 * does. This version writes none, so the triggers' conditions are false on its every insert and update.
 * Declared on the TaskResult entity.
 */
export class Migration20261130500001StoredTaskTokenNotify extends Migration {
  override up(): void {
    for (const event of ['insert', 'update']) {
      this.addSql(
        `create or replace function "task_results_task_results_stored_token_${event}_fn"() returns trigger as $$ begin perform pg_notify('runtasks_principals', 'token-created'); return null; end; $$ language plpgsql;`,
      );
    }
    this.addSql(
      `create trigger "task_results_stored_token_insert" AFTER INSERT on "task_results" for each ROW when (new.callback_token_hash is not null) execute function "task_results_task_results_stored_token_insert_fn"();`,
    );
    this.addSql(
      `create trigger "task_results_stored_token_update" AFTER UPDATE on "task_results" for each ROW when (new.callback_token_hash is not null and old.callback_token_hash is distinct from new.callback_token_hash) execute function "task_results_task_results_stored_token_update_fn"();`,
    );
  }

  override down(): void {
    for (const event of ['insert', 'update']) {
      this.addSql(`drop trigger if exists "task_results_stored_token_${event}" on "task_results";`);
      this.addSql(`drop function if exists "task_results_task_results_stored_token_${event}_fn"();`);
    }
  }
}
