import { Migration } from '@mikro-orm/migrations';

/**
 * A task result is unique per (stage, task); it was also unique per (stage, workspace task), which that
 * already implies: a workspace task names one task, and a result copies both from the same row. The
 * second index cost every run's results one more index entry each, written at creation (six for a run
 * of 2 stages × 3 tasks), and served no read the first cannot (both lead with the stage).
 */
export class Migration20261124180000ResultStageTaskUnique extends Migration {
  override up(): void {
    this.addSql(`alter table "task_results" drop constraint "task_results_stage_workspace_task_unique";`);
  }

  override down(): void {
    this.addSql(
      `alter table "task_results" add constraint "task_results_stage_workspace_task_unique" unique ("task_stage_id", "workspace_task_id");`,
    );
  }
}
