import { Migration } from '@mikro-orm/migrations';

/**
 * The deadline index holds results with a deadline only. Its predicate was `status in ('pending',
 * 'running')`, which every hot statement on one result implies (a callback, an acknowledgement, a claim
 * all say the result is open): PostgreSQL's generic plan for them could read the whole index (every open
 * result) and filter by id instead of probing the primary key, whenever the statistics made the open
 * results look few (measured: ~330 buffers per callback instead of ~20 with a few hundred results open).
 * A predicate that also needs `progress_deadline is not null`, which only the sweeper's and the deadline
 * jobs' statements state, leaves those plans one choice: the primary key.
 */
export class Migration20261123220000DeadlineIndexPredicate extends Migration {
  override up(): void {
    this.addSql(`drop index "task_results_open_deadline_idx";`);
    this.addSql(
      `create index "task_results_open_deadline_idx" on "task_results" ("progress_deadline") where "status" in ('pending', 'running') and "progress_deadline" is not null;`,
    );
  }

  override down(): void {
    this.addSql(`drop index "task_results_open_deadline_idx";`);
    this.addSql(
      `create index "task_results_open_deadline_idx" on "task_results" ("progress_deadline") where "status" in ('pending', 'running');`,
    );
  }
}
