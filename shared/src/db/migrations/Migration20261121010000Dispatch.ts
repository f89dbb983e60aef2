import { Migration } from '@mikro-orm/migrations';

/** What the dispatcher needs: the acknowledgement, the next attempt, and a re-usable callback token. */
export class Migration20261121010000Dispatch extends Migration {
  override up(): void {
    this.addSql(
      `alter table "task_results" add column "callback_token_encrypted" text null, add column "acknowledged_at" timestamptz null, add column "next_attempt_at" timestamptz null;`,
    );
  }

  override down(): void {
    this.addSql(
      `alter table "task_results" drop column "callback_token_encrypted", drop column "acknowledged_at", drop column "next_attempt_at";`,
    );
  }
}
