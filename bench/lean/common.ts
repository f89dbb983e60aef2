/**
 * What the lean reference (bench/lean/api.ts, worker.ts) and the guarded lean reference
 * (bench/lean/guarded-*.ts) do alike: read and answer a run's creation, set up a worker, build a task
 * request's payload, POST it signed.
 */
import type { Context } from 'koa';
import { createHmac, randomBytes } from 'node:crypto';
import pg from 'pg';
import { Agent, request } from 'undici';
import { required } from './env.ts';

export const MEDIA_TYPE = 'application/vnd.api+json';

export type Body = { data?: { attributes?: Record<string, unknown>; relationships?: { workspace?: { data?: { id?: unknown } } } } };

export async function jsonBody(ctx: Context): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
}

export const newId = (prefix: string): string => `${prefix}-${randomBytes(8).toString('hex')}`;

/** A `POST /runs` body's workspace and message, with the new run's id; undefined (the answer a 422) without a workspace. */
export async function runToCreate(ctx: Context): Promise<{ id: string; workspaceId: string; message: string } | undefined> {
  const body = (await jsonBody(ctx)) as Body;
  const workspaceId = body.data?.relationships?.workspace?.data?.id;
  if (typeof workspaceId !== 'string') {
    ctx.status = 422;
    return undefined;
  }
  return { id: newId('run'), workspaceId, message: String(body.data?.attributes?.['message'] ?? '') };
}

/** The 201 of a created run. */
export function answerCreated(ctx: Context, run: { id: string; message: string }): void {
  ctx.status = 201;
  ctx.type = MEDIA_TYPE;
  ctx.body = JSON.stringify({ data: { id: run.id, type: 'runs', attributes: { status: 'pending', message: run.message } } });
}

/** A worker's pool, HTTP agent and settings, from the variables the harness sets. */
export function workerSetup(): { pool: pg.Pool; agent: Agent; tasksPerStage: number; taskUrl: string; hmacKey: string; apiUrl: string } {
  return {
    pool: new pg.Pool({ connectionString: required('DATABASE_URL'), max: 10 }),
    agent: new Agent({ connections: 64 }),
    tasksPerStage: Number(required('LEAN_TASKS')),
    taskUrl: required('LEAN_TASK_URL'),
    hmacKey: required('LEAN_HMAC_KEY'),
    apiUrl: required('LEAN_API_URL'),
  };
}

/** What a task request's payload says of its run and result. */
export interface PayloadRun {
  id: string;
  workspace_id: string;
  message: string;
  created_at: Date;
}

/** The HCP-shaped payload of a task request. */
export function taskPayload(apiUrl: string, run: PayloadRun, stage: string, resultId: string, accessToken: string): string {
  return JSON.stringify({
    payload_version: 1,
    stage,
    access_token: accessToken,
    capabilities: { outcomes: true },
    configuration_version_download_url: `${apiUrl}/api/v2/configuration-versions/cv-lean/download`,
    configuration_version_id: 'cv-lean',
    is_speculative: false,
    organization_name: 'lean',
    plan_json_api_url: stage === 'pre_plan' ? null : `${apiUrl}/api/v2/plans/plan-lean/json-output`,
    run_app_url: `${apiUrl}/app/lean/workspaces/lean/runs/${run.id}`,
    run_created_at: run.created_at.toISOString(),
    run_created_by: 'bench',
    run_id: run.id,
    run_message: run.message,
    task_result_callback_url: `${apiUrl}/api/v2/task-results/${resultId}/callback`,
    task_result_enforcement_level: 'mandatory',
    task_result_id: resultId,
    vcs_branch: null,
    vcs_commit_url: null,
    vcs_pull_request_url: null,
    vcs_repo_url: null,
    workspace_app_url: `${apiUrl}/app/lean/workspaces/lean`,
    workspace_id: run.workspace_id,
    workspace_name: 'lean',
    workspace_working_directory: '',
  });
}

/** POSTs `body` to the task server, signed (HMAC-SHA512, `X-TFC-Task-Signature`); its answer's status. */
export async function postSigned(agent: Agent, taskUrl: string, hmacKey: string, body: string): Promise<number> {
  const response = await request(taskUrl, {
    method: 'POST',
    dispatcher: agent,
    body,
    headers: { 'content-type': 'application/json', 'x-tfc-task-signature': createHmac('sha512', hmacKey).update(body).digest('hex') },
  });
  await response.body.dump();
  return response.statusCode;
}
