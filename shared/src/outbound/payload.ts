import type { RunStage } from '../domain/statuses.ts';

/** The run task request body, payload version 1 (every field HCP sends; docs/api.md, "Compatibility"). Field order is stable. */
export interface TaskRequestPayload {
  payload_version: 1;
  stage: RunStage | typeof VERIFICATION_STAGE;
  access_token: string;
  capabilities: { outcomes: true };
  configuration_version_download_url: string | null;
  configuration_version_id: string | null;
  is_speculative: boolean;
  organization_name: string;
  plan_json_api_url?: string;
  run_app_url: string;
  run_created_at: string;
  run_created_by: string;
  run_id: string;
  run_message: string;
  task_result_callback_url: string;
  task_result_enforcement_level: 'advisory' | 'mandatory';
  task_result_id: string;
  vcs_branch: string | null;
  vcs_commit_url: string | null;
  vcs_commit_hash: string | null;
  vcs_pull_request_url: string | null;
  vcs_repo_url: string | null;
  workspace_app_url: string;
  workspace_id: string;
  workspace_name: string;
  workspace_working_directory: string;
  project_id: string | null;
  project_name: string | null;
  project_app_url: string | null;
}

/** Servers recognise the verification request by this access token and answer 200 without calling back. */
export const VERIFICATION_ACCESS_TOKEN = 'test-token';

/**
 * The verification request's stage, as HCP Terraform sends it: some servers take a request for the test
 * only when the token is `test-token` and the stage is `test`, and treat any other as a run's.
 */
export const VERIFICATION_STAGE = 'test';

/** The result id the verification request names; its callback URL answers the test token with 200 and changes nothing. */
export const VERIFICATION_RESULT_ID = 'taskrs-verification';

/** Compact JSON, serialized once: the signature covers exactly these bytes. */
export function encodePayload(payload: TaskRequestPayload): Buffer {
  return Buffer.from(JSON.stringify(payload), 'utf8');
}

/** The test POST sent when a task is created or its URL or key changes. */
export function verificationPayload(baseUrl: string, organizationName: string, now = new Date()): TaskRequestPayload {
  return {
    payload_version: 1,
    stage: VERIFICATION_STAGE,
    access_token: VERIFICATION_ACCESS_TOKEN,
    capabilities: { outcomes: true },
    configuration_version_download_url: null,
    configuration_version_id: null,
    is_speculative: false,
    organization_name: organizationName,
    plan_json_api_url: `${baseUrl}/api/v2/plans/plan-verification/json-output`,
    run_app_url: `${baseUrl}/app/${organizationName}/workspaces/verification/runs/run-verification`,
    run_created_at: now.toISOString(),
    run_created_by: 'runtasks',
    run_id: 'run-verification',
    run_message: 'Run task verification',
    task_result_callback_url: `${baseUrl}/api/v2/task-results/${VERIFICATION_RESULT_ID}/callback`,
    task_result_enforcement_level: 'advisory',
    task_result_id: VERIFICATION_RESULT_ID,
    vcs_branch: null,
    vcs_commit_url: null,
    vcs_commit_hash: null,
    vcs_pull_request_url: null,
    vcs_repo_url: null,
    workspace_app_url: `${baseUrl}/app/${organizationName}/workspaces/verification`,
    workspace_id: 'ws-verification',
    workspace_name: 'verification',
    workspace_working_directory: '',
    project_id: null,
    project_name: null,
    project_app_url: null,
  };
}
