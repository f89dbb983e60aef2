import type { RunStage } from '../domain/statuses.ts';
import type { TaskRequestPayload } from '../outbound/payload.ts';

/** What the dispatcher reads about a result, its stage, run, workspace and organization (one query). */
export interface DispatchRow {
  id: string;
  status: string;
  acknowledged_at: Date | null;
  attempts: number;
  task_url: string;
  hmac_key_encrypted: string | null;
  callback_token_encrypted: string | null;
  enforcement_level: 'advisory' | 'mandatory';
  progress_deadline: Date | null;
  stage: RunStage;
  run_id: string;
  plan_id: string;
  run_message: string;
  run_created_at: Date;
  plan_only: boolean;
  configuration_version_id: string | null;
  workspace_id: string;
  workspace_name: string;
  working_directory: string;
  organization_name: string;
}

/** A DispatchRow's columns of the result itself (tr). */
export const DISPATCH_RESULT_COLUMNS = `tr.id, tr.status, tr.acknowledged_at, tr.attempts, tr.task_url, tr.hmac_key_encrypted,
         tr.callback_token_encrypted, tr.enforcement_level, tr.progress_deadline`;

/** A DispatchRow's columns of the result's run (r), workspace (w) and organization (o). */
export const DISPATCH_RUN_COLUMNS = `r.id as run_id, r.plan_id, r.message as run_message, r.created_at as run_created_at, r.plan_only,
         r.configuration_version_id, w.id as workspace_id, w.name as workspace_name, w.working_directory, o.name as organization_name`;

export type DispatchResultFields = Pick<
  DispatchRow,
  | 'id'
  | 'status'
  | 'acknowledged_at'
  | 'attempts'
  | 'task_url'
  | 'hmac_key_encrypted'
  | 'callback_token_encrypted'
  | 'enforcement_level'
  | 'progress_deadline'
>;
export type DispatchRunFields = Omit<DispatchRow, keyof DispatchResultFields | 'stage'>;

/** The DISPATCH_RUN_COLUMNS of a row that has them among others. */
export function dispatchRunFields(row: DispatchRunFields): DispatchRunFields {
  return {
    run_id: row.run_id,
    plan_id: row.plan_id,
    run_message: row.run_message,
    run_created_at: row.run_created_at,
    plan_only: row.plan_only,
    configuration_version_id: row.configuration_version_id,
    workspace_id: row.workspace_id,
    workspace_name: row.workspace_name,
    working_directory: row.working_directory,
    organization_name: row.organization_name,
  };
}

export const DISPATCH_COLUMNS = `${DISPATCH_RESULT_COLUMNS}, ts.stage, ${DISPATCH_RUN_COLUMNS}`;

export const DISPATCH_ROW_SQL = `
  select ${DISPATCH_COLUMNS}
    from task_results tr
    join task_stages ts on ts.id = tr.task_stage_id
    join runs r on r.id = ts.run_id
    join workspaces w on w.id = r.workspace_id
    join organizations o on o.id = r.organization_id
   where tr.id = ?`;

/** Stages after the plan exists carry the plan JSON URL (as HCP sends it). */
const STAGES_WITH_PLAN: ReadonlySet<RunStage> = new Set(['post_plan', 'pre_apply', 'post_apply']);

/** The run task request, payload version 1, with every field HCP sends. */
export function buildTaskPayload(row: DispatchRow, accessToken: string, baseUrl: string): TaskRequestPayload {
  const api = `${baseUrl}/api/v2`;
  const workspaceAppUrl = `${baseUrl}/app/${row.organization_name}/workspaces/${row.workspace_name}`;
  const payload: TaskRequestPayload = {
    payload_version: 1,
    stage: row.stage,
    access_token: accessToken,
    capabilities: { outcomes: true },
    configuration_version_download_url: row.configuration_version_id
      ? `${api}/configuration-versions/${row.configuration_version_id}/download`
      : null,
    configuration_version_id: row.configuration_version_id,
    is_speculative: row.plan_only,
    organization_name: row.organization_name,
    run_app_url: `${workspaceAppUrl}/runs/${row.run_id}`,
    run_created_at: new Date(row.run_created_at).toISOString(),
    run_created_by: 'api',
    run_id: row.run_id,
    run_message: row.run_message,
    task_result_callback_url: `${api}/task-results/${row.id}/callback`,
    task_result_enforcement_level: row.enforcement_level,
    task_result_id: row.id,
    vcs_branch: null,
    vcs_commit_url: null,
    vcs_commit_hash: null,
    vcs_pull_request_url: null,
    vcs_repo_url: null,
    workspace_app_url: workspaceAppUrl,
    workspace_id: row.workspace_id,
    workspace_name: row.workspace_name,
    workspace_working_directory: row.working_directory,
    project_id: null,
    project_name: null,
    project_app_url: null,
  };
  if (STAGES_WITH_PLAN.has(row.stage)) payload.plan_json_api_url = `${api}/plans/${row.plan_id}/json-output`;
  return payload;
}
