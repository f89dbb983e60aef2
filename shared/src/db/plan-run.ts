import type { SqlRunner } from './prepared.ts';
import { newId } from '../domain/ids.ts';
import { planTaskStages, type PlannableTask } from '../domain/planner.ts';
import { RUN_STAGES, type EnforcementLevel, type RunStage } from '../domain/statuses.ts';

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

/** What planning needs to know of the run, which the API has at hand when it creates one. */
export interface PlanContext {
  workspaceId: string;
  organizationId: string;
  planOnly: boolean;
  /** The organization may use global run tasks (standard edition with them switched on). */
  globalEntitled: boolean;
}

/**
 * The workspace's attached tasks, then (when entitled) the organization's global ones, each in
 * creation order: one statement. Parameters: workspace, organization, entitled to global tasks.
 */
const PLANNABLE_TASKS_SQL = `
  select task_id, workspace_task_id, name, url, hmac_key_encrypted, enabled, enforcement_level, stages from (
    select 0 as source, wt.created_at as at, wt.id as tiebreak, t.id as task_id, wt.id as workspace_task_id, t.name, t.url,
           t.hmac_key_encrypted, t.enabled, wt.enforcement_level, wt.stages
      from workspace_tasks wt join run_tasks t on t.id = wt.task_id
     where wt.workspace_id = ?
    union all
    select 1, t.created_at, t.id, t.id, null, t.name, t.url, t.hmac_key_encrypted, t.enabled, t.global_enforcement_level, t.global_stages
      from run_tasks t where t.organization_id = ? and ?::boolean and t.global_enabled) tasks
  order by source, at, tiebreak`;

export interface InsertedStage {
  id: string;
  stage: RunStage;
}

/**
 * Plans a run's task stages and results and inserts them idempotently: unique (run, stage) and
 * (stage, task) with ON CONFLICT DO NOTHING make a second call, by anyone, a no-op. Run inside the
 * transaction that repairs a run (the worker), which knows only its id.
 */
export async function insertPlannedStages(tx: SqlRunner, runId: string): Promise<InsertedStage[]> {
  const [run] = await tx.execute<{ workspace_id: string; organization_id: string; plan_only: boolean; global_entitled: boolean }[]>(
    `select r.workspace_id, r.organization_id, r.plan_only, (o.edition = 'standard' and o.global_run_tasks_enabled) as global_entitled
       from runs r join organizations o on o.id = r.organization_id where r.id = ?`,
    [runId],
  );
  if (!run) return [];
  return insertPlannedStagesFor(tx, runId, {
    workspaceId: run.workspace_id,
    organizationId: run.organization_id,
    planOnly: run.plan_only,
    globalEntitled: run.global_entitled,
  });
}

/**
 * As insertPlannedStages, for a caller that knows the run: the API, in the transaction that creates
 * it. Returns the run's stages in lifecycle order.
 */
export async function insertPlannedStagesFor(tx: SqlRunner, runId: string, run: PlanContext): Promise<InsertedStage[]> {
  const tasks = await tx.execute<TaskRow[]>(PLANNABLE_TASKS_SQL, [run.workspaceId, run.organizationId, run.globalEntitled]);
  const workspaceTasks = tasks.filter((task) => task.workspace_task_id !== null);
  const globalTasks = tasks.filter((task) => task.workspace_task_id === null);
  const planned = planTaskStages({
    workspaceTasks: workspaceTasks.map(toPlannable),
    globalTasks: globalTasks.map(toPlannable),
    speculative: run.planOnly,
  });
  if (planned.length === 0) return [];
  // Two statements whatever the number of stages and tasks: every stage, then (with their ids) every result.
  const inserted = await tx.execute<{ id: string; stage: RunStage }[]>(
    // open_results starts at the stage's number of results (inserted below, all pending); the
    // task_results trigger counts it down as they end.
    `insert into task_stages (id, run_id, stage, status, status_timestamps, open_results, version, created_at, updated_at)
     values ${planned.map(() => `(?, ?, ?, 'pending', '{}', ?::int, 1, now(), now())`).join(', ')} on conflict (run_id, stage) do nothing returning id, stage`,
    planned.flatMap(({ stage, tasks }) => [newId('taskStage'), runId, stage, tasks.length]),
  );
  // A stage that already existed (planned by someone else first) is not returned: read the ids then.
  const stageRows =
    inserted.length === planned.length
      ? inserted
      : await tx.execute<{ id: string; stage: RunStage }[]>(`select id, stage from task_stages where run_id = ?`, [runId]);
  const stageIds = new Map(stageRows.map((row) => [row.stage, row.id]));
  const stages = [...stageRows].sort((a, b) => RUN_STAGES.indexOf(a.stage) - RUN_STAGES.indexOf(b.stage));
  const rows = planned.flatMap(({ stage, tasks }) => tasks.map((task) => ({ stage, task })));
  if (rows.length === 0) return stages;
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
      run.planOnly,
      index,
      index,
    ]),
  );
  return stages;
}
