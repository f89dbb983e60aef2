import { Migration } from '@mikro-orm/migrations';

/**
 * A delivery attempt is keyed by its result and its ordinal there, which every statement finds it by and
 * which was already unique: its bigserial key was a second index (and a sequence) that every POST wrote
 * and nothing searched. The API names an attempt `<result id>.<attempt>` since.
 */
export class Migration20261203000000DeliveryAttemptKey extends Migration {
  override up(): void {
    this.addSql(`alter table "delivery_attempts" drop constraint "delivery_attempts_pkey";`);
    this.addSql(`alter table "delivery_attempts" drop constraint "delivery_attempts_result_attempt_unique";`);
    this.addSql(`alter table "delivery_attempts" add constraint "delivery_attempts_pkey" primary key ("task_result_id", "attempt");`);
    this.addSql(`alter table "delivery_attempts" drop column "id";`);
  }

  override down(): void {
    this.addSql(`alter table "delivery_attempts" drop constraint "delivery_attempts_pkey";`);
    this.addSql(`alter table "delivery_attempts" add column "id" bigserial primary key;`);
    this.addSql(
      `alter table "delivery_attempts" add constraint "delivery_attempts_result_attempt_unique" unique ("task_result_id", "attempt");`,
    );
  }
}
