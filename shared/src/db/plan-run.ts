import type { SqlRunner } from './prepared.ts';
import { newId } from '../domain/ids.ts';
import { planTaskStages, type PlannableTask } from '../domain/planner.ts';
import type { EnforcementLevel, RunStage } from '../domain/statuses.ts';

interface TaskRow {
  task_id: string;
  workspace_task_id: string | null;
  name: string;
  url: string;
  hmac_key_encrypted: string | null;
  enabled: boolean;
  enforcement_level: EnforcementLevel;
  stages: RunStage[];
}

const toPlannable = (row: TaskRow): PlannableTask => ({
  taskId: row.task_id,
  workspaceTaskId: row.workspace_task_id,
  name: row.name,
  url: row.url,
  hmacKeyEncrypted: row.hmac_key_encrypted,
  enabled: row.enabled,
  enforcementLevel: row.enforcement_level,
  stages: row.stages,
});

/**
 * Plans a run's task stages and results and inserts them idempotently: unique (run, stage) and
 * (stage, task) with ON CONFLICT DO NOTHING make a second call, by anyone, a no-op. Run inside the
 * transaction that creates the run (the API) or that repairs it (the worker).
 */
export async function insertPlannedStages(tx: SqlRunner, runId: string): Promise<number> {
  const [run] = await tx.execute<{ workspace_id: string; organization_id: string; plan_only: boolean; global_entitled: boolean }[]>(
    `select r.workspace_id, r.organization_id, r.plan_only, (o.edition = 'standard' and o.global_run_tasks_enabled) as global_entitled
       from runs r join organizations o on o.id = r.organization_id where r.id = ?`,
    [runId],
  );
  if (!run) return 0;
  const workspaceTasks: TaskRow[] = await tx.execute(
    `select t.id as task_id, wt.id as workspace_task_id, t.name, t.url, t.hmac_key_encrypted, t.enabled, wt.enforcement_level, wt.stages
       from workspace_tasks wt join run_tasks t on t.id = wt.task_id
      where wt.workspace_id = ? order by wt.created_at, wt.id`,
    [run.workspace_id],
  );
  const globalTasks: TaskRow[] = run.global_entitled
    ? await tx.execute(
        `select t.id as task_id, null as workspace_task_id, t.name, t.url, t.hmac_key_encrypted, t.enabled,
                t.global_enforcement_level as enforcement_level, t.global_stages as stages
           from run_tasks t where t.organization_id = ? and t.global_enabled order by t.created_at, t.id`,
        [run.organization_id],
      )
    : [];
  const planned = planTaskStages({
    workspaceTasks: workspaceTasks.map(toPlannable),
    globalTasks: globalTasks.map(toPlannable),
    speculative: run.plan_only,
  });
  if (planned.length === 0) return 0;
  // Two statements whatever the number of stages and tasks: every stage, then (with their ids) every result.
  const inserted = await tx.execute<{ id: string; stage: RunStage }[]>(
    `insert into task_stages (id, run_id, stage, status, status_timestamps, version, created_at, updated_at)
     values ${planned.map(() => `(?, ?, ?, 'pending', '{}', 1, now(), now())`).join(', ')} on conflict (run_id, stage) do nothing returning id, stage`,
    planned.flatMap(({ stage }) => [newId('taskStage'), runId, stage]),
  );
  // A stage that already existed (planned by someone else first) is not returned: read the ids then.
  const stageRows =
    inserted.length === planned.length
      ? inserted
      : await tx.execute<{ id: string; stage: RunStage }[]>(`select id, stage from task_stages where run_id = ?`, [runId]);
  const stageIds = new Map(stageRows.map((row) => [row.stage, row.id]));
  const rows = planned.flatMap(({ stage, tasks }) => tasks.map((task) => ({ stage, task })));
  if (rows.length === 0) return 0;
  // created_at keeps the planned order (results are listed by it): one clock reading per row as
  // before, plus the row's position in microseconds so rows inserted within the same microsecond stay ordered.
  await tx.execute(
    `insert into task_results (id, task_stage_id, task_id, workspace_task_id, task_name, task_url, hmac_key_encrypted,
                               enforcement_level, stage, is_speculative, status, status_timestamps, attempts, outcomes_count,
                               version, created_at, updated_at)
     values ${rows
       .map(
         () =>
           `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', '{}', 0, 0, 1, clock_timestamp() + ? * interval '1 microsecond', clock_timestamp() + ? * interval '1 microsecond')`,
       )
       .join(', ')}
     on conflict do nothing`,
    rows.flatMap(({ stage, task }, index) => [
      newId('taskResult'),
      stageIds.get(stage),
      task.taskId,
      task.workspaceTaskId,
      task.name,
      task.url,
      task.hmacKeyEncrypted,
      task.enforcementLevel,
      stage,
      run.plan_only,
      index,
      index,
    ]),
  );
  return rows.length;
}
