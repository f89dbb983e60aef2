import { Migration } from '@mikro-orm/migrations';

/**
 * A run notification's answers are kept on its own delivery row (`responses`, the latest first, and
 * `answered_at`), which its claim and its settling rewrite anyway, instead of on its configuration's
 * `delivery_responses`: that row (up to ten answers of up to 1 KB each, TOASTed) was rewritten at every
 * delivery, a non-HOT update and most of a notification's WAL. A configuration's `delivery-responses`
 * are now its latest answered deliveries' answers merged with those its column still holds
 * (verifications, and answers kept before this migration), the latest first (docs/notifications.md).
 * The index is partial: a delivery's insert and claim write no entry into it, only its answers do.
 */
export class Migration20261201200000DeliveryResponsesApart extends Migration {
  override up(): void {
    this.addSql(`alter table "notification_deliveries" add column "responses" jsonb null, add column "answered_at" timestamptz null;`);
    this.addSql(
      `create index "notification_deliveries_answered_idx" on "notification_deliveries" ("configuration_id", "answered_at") where "answered_at" is not null;`,
    );
  }

  override down(): void {
    this.addSql(`drop index if exists "notification_deliveries_answered_idx";`);
    this.addSql(`alter table "notification_deliveries" drop column if exists "answered_at", drop column if exists "responses";`);
  }
}
