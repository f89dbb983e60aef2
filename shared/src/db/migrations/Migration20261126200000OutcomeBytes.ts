import { Migration } from '@mikro-orm/migrations';

/**
 * The bytes of a result's outcome bodies, counted beside `outcomes_count` by the callback that adds
 * them, so that the cap on both is checked in that statement, under the result's row lock. Open results
 * get what they hold already; final ones take no more outcomes, so theirs stay 0.
 */
export class Migration20261126200000OutcomeBytes extends Migration {
  override up(): void {
    this.addSql(`alter table "task_results" add column "outcomes_bytes" int not null default 0;`);
    this.addSql(
      `update "task_results" tr set "outcomes_bytes" = o."bytes"
         from (select "task_result_id", sum(octet_length(coalesce("body", '')))::int as "bytes" from "task_result_outcomes" group by "task_result_id") o
        where o."task_result_id" = tr."id" and tr."status" in ('pending', 'running');`,
    );
  }

  override down(): void {
    this.addSql(`alter table "task_results" drop column "outcomes_bytes";`);
  }
}
