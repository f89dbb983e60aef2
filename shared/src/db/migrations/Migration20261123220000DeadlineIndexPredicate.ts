import { Migration } from '@mikro-orm/migrations';

/**
 * The deadline index holds results with a deadline only. Its predicate was `status in ('pending',
 * 'running')`, which every hot statement on one result implies (a callback, an acknowledgement, a claim
 * all say the result is open): PostgreSQL's generic plan for them could read the whole index (every open
 * result) and filter by id instead of probing the primary key, whenever the statistics made the open
 * results look few (measured: ~330 buffers per callback instead of ~25 with a few hundred results open).
 * A predicate that also needs `progress_deadline is not null`, which only the sweeper's and the deadline
 * jobs' statements state, leaves those plans one choice: the primary key. The sweeper may say so
 * because a result with a hard deadline has a progress deadline (both are set when its stage starts,
 * and callbacks only move the progress deadline), which a constraint now keeps.
 * Like the migration that made the index, this holds task_results' lock while the index is built.
 */
export class Migration20261123220000DeadlineIndexPredicate extends Migration {
  override up(): void {
    this.addSql(
      `alter table "task_results" add constraint "task_results_deadlines_check" check (hard_deadline is null or progress_deadline is not null);`,
    );
    this.addSql(`drop index "task_results_open_deadline_idx";`);
    this.addSql(
      `create index "task_results_open_deadline_idx" on "task_results" ("progress_deadline") where "status" in ('pending', 'running') and "progress_deadline" is not null;`,
    );
  }

  override down(): void {
    this.addSql(`alter table "task_results" drop constraint "task_results_deadlines_check";`);
    this.addSql(`drop index "task_results_open_deadline_idx";`);
    this.addSql(
      `create index "task_results_open_deadline_idx" on "task_results" ("progress_deadline") where "status" in ('pending', 'running');`,
    );
  }
}
