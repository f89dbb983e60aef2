import { Migration } from '@mikro-orm/migrations';

/**
 * Every run writes a run event at its creation, and almost none of them has a comment: the index on
 * `comment_id` held an entry for each null. It is only searched by a value (a comment's deletion sets
 * its events' link to null by it), which `is not null` implies, so partial it serves the same searches
 * and a run's creation writes one index entry fewer.
 */
export class Migration20261202000000RunEventCommentIndex extends Migration {
  override up(): void {
    this.addSql(`drop index if exists "run_events_comment_idx";`);
    this.addSql(`create index "run_events_comment_idx" on "run_events" ("comment_id") where "comment_id" is not null;`);
  }

  override down(): void {
    this.addSql(`drop index if exists "run_events_comment_idx";`);
    this.addSql(`create index "run_events_comment_idx" on "run_events" ("comment_id");`);
  }
}
