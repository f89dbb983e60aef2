import { Migration } from '@mikro-orm/migrations';

/**
 * A run's status changes are never HOT (its status is in the predicates of the sweeper's and the queue's
 * indexes), so each writes an entry into every index whose predicate the row meets, nulls included. Two
 * of them index a column that is null for most runs and are only ever searched by a value: the plan JSON's
 * stored object (a reported plan; retention and the foreign key's `set null` look runs up by it) and the
 * configuration version (whether one is in use). Made partial (`is not null`, which every `col = value`
 * search implies, join clauses included), a run without them writes neither at its creation nor at any
 * status change: six index entries fewer per run of the benchmark's pipeline.
 */
export class Migration20261130500002RunsNullableIndexes extends Migration {
  override up(): void {
    this.addSql(`drop index if exists "runs_plan_object_idx";`);
    this.addSql(`create index "runs_plan_object_idx" on "runs" ("plan_object_key") where "plan_object_key" is not null;`);
    this.addSql(`drop index if exists "runs_configuration_version_idx";`);
    this.addSql(
      `create index "runs_configuration_version_idx" on "runs" ("configuration_version_id") where "configuration_version_id" is not null;`,
    );
  }

  override down(): void {
    this.addSql(`drop index if exists "runs_plan_object_idx";`);
    this.addSql(`create index "runs_plan_object_idx" on "runs" ("plan_object_key");`);
    this.addSql(`drop index if exists "runs_configuration_version_idx";`);
    this.addSql(`create index "runs_configuration_version_idx" on "runs" ("configuration_version_id");`);
  }
}
