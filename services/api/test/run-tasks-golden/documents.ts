import { expect } from '@jest/globals';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { expectError, type Response } from '../../../../test/support/assertions.ts';
import { JSON_API } from '../../../../test/support/fixtures.ts';

/** The golden documents of run tasks, stages, results and outcomes: whole, field by field. */

/** go-tfe's `iso8601` layout: literal Z, fractional seconds tolerated, no offsets. */
export const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
export const isoTimestamp = () => expect.stringMatching(ISO);
export const ID = {
  task: /^task-[A-Za-z0-9]{16}$/,
  workspaceTask: /^wstask-[A-Za-z0-9]{16}$/,
  taskStage: /^ts-[A-Za-z0-9]{16}$/,
  taskResult: /^taskrs-[A-Za-z0-9]{16}$/,
  outcome: /^taskrso-[A-Za-z0-9]{16}$/,
  workspace: /^ws-[A-Za-z0-9]{16}$/,
};

export type Stage = 'pre_plan' | 'post_plan' | 'pre_apply' | 'post_apply';
export type Enforcement = 'advisory' | 'mandatory';
export interface GlobalConfiguration {
  enabled: boolean;
  stages: Stage[];
  'enforcement-level': Enforcement;
}
/** What a task created without global options reports in an entitled organization. */
export const GLOBAL_DEFAULT: GlobalConfiguration = { enabled: false, stages: [], 'enforcement-level': 'advisory' };

/** A loopback task server answering every request (the verification POST) with 200. */
export interface TaskServer {
  url: string;
  requests: { headers: IncomingHttpHeaders; body: Buffer }[];
  server: Server;
}

export async function startTaskServer(): Promise<TaskServer> {
  const requests: TaskServer['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests, server };
}

/** Asserts the status and the JSON:API media type; the message carries the body when the status differs. */
export function expectStatus(res: Response, status: number): void {
  expect({ status: res.status, body: res.status === status ? 'as expected' : res.text }).toEqual({ status, body: 'as expected' });
  if (status !== 204) expect(res.headers['content-type']).toContain(JSON_API);
}

/** `meta.pagination` exactly as go-tfe reads it, and the five page links. */
export function expectPagination(res: Response, totalCount: number, page = 1, size = 20): void {
  const totalPages = Math.max(1, Math.ceil(totalCount / size));
  expect(res.body.meta).toEqual({
    pagination: {
      'current-page': page,
      'page-size': size,
      'prev-page': page > 1 ? page - 1 : null,
      'next-page': page < totalPages ? page + 1 : null,
      'total-pages': totalPages,
      'total-count': totalCount,
    },
  });
  expect(Object.keys(res.body.links).sort()).toEqual(['first', 'last', 'next', 'prev', 'self']);
  expect(res.body.links.self).toEqual(expect.stringContaining(`page%5Bnumber%5D=${page}`));
}

export function idOf(resource: unknown, pattern: RegExp): string {
  const id = (resource as { id?: unknown }).id;
  expect(id).toEqual(expect.stringMatching(pattern));
  return id as string;
}

export interface ExpectedTask {
  organization: string;
  name: string;
  url: string;
  description: string | null;
  enabled: boolean;
  workspaceTaskIds?: string[];
  /** `undefined`: the organization is not entitled to global run tasks, so the attribute is absent. */
  global: GlobalConfiguration | undefined;
}

export function expectTask(resource: unknown, expected: ExpectedTask): string {
  const id = idOf(resource, ID.task);
  const attributes: Record<string, unknown> = {
    name: expected.name,
    url: expected.url,
    description: expected.description,
    category: 'task',
    'hmac-key': null,
    enabled: expected.enabled,
    'created-at': isoTimestamp(),
    'updated-at': isoTimestamp(),
  };
  if (expected.global) attributes['global-configuration'] = expected.global;
  expect(resource).toEqual({
    id,
    type: 'tasks',
    attributes,
    relationships: {
      organization: { data: { id: expected.organization, type: 'organizations' } },
      'workspace-tasks': { data: (expected.workspaceTaskIds ?? []).map((wstask) => ({ id: wstask, type: 'workspace-tasks' })) },
    },
    links: { self: `/api/v2/tasks/${id}` },
  });
  return id;
}

export interface ExpectedWorkspaceTask {
  workspaceId: string;
  taskId: string;
  enforcement: Enforcement;
  stages: Stage[];
}

export function expectWorkspaceTask(resource: unknown, expected: ExpectedWorkspaceTask): string {
  const id = idOf(resource, ID.workspaceTask);
  expect(resource).toEqual({
    id,
    type: 'workspace-tasks',
    attributes: {
      'enforcement-level': expected.enforcement,
      stage: expected.stages[0],
      stages: expected.stages,
      'created-at': isoTimestamp(),
      'updated-at': isoTimestamp(),
    },
    relationships: {
      task: { data: { id: expected.taskId, type: 'tasks' } },
      workspace: { data: { id: expected.workspaceId, type: 'workspaces' } },
    },
    links: { self: `/api/v2/workspaces/${expected.workspaceId}/tasks/${id}` },
  });
  return id;
}

export interface ExpectedStage {
  runId: string;
  stage: Stage;
  status: string;
  resultIds: string[];
  statusTimestamps?: Record<string, unknown>;
  canOverride?: boolean;
}

export function expectTaskStage(resource: unknown, expected: ExpectedStage): string {
  const id = idOf(resource, ID.taskStage);
  const canOverride = expected.canOverride ?? true;
  expect(resource).toEqual({
    id,
    type: 'task-stages',
    attributes: {
      status: expected.status,
      stage: expected.stage,
      'status-timestamps': expected.statusTimestamps ?? {},
      'created-at': isoTimestamp(),
      'updated-at': isoTimestamp(),
      permissions: { 'can-override-policy': false, 'can-override-tasks': canOverride, 'can-override': canOverride },
      actions: { 'is-overridable': expected.status === 'awaiting_override' && canOverride },
    },
    relationships: {
      run: { data: { id: expected.runId, type: 'runs' } },
      'task-results': { data: expected.resultIds.map((result) => ({ id: result, type: 'task-results' })) },
      'policy-evaluations': { data: [] },
    },
    links: { self: `/api/v2/task-stages/${id}` },
  });
  return id;
}

export interface ExpectedResult {
  stageId: string;
  taskId: string;
  taskName: string;
  taskUrl: string;
  stage: Stage;
  workspaceTaskId: string | null;
  enforcement: Enforcement;
  isSpeculative?: boolean;
  outcomesCount?: number;
  /** `pending` with no timestamps unless told. */
  status?: string;
  statusTimestamps?: Record<string, unknown>;
}

/** A stage, or a result, as its run's creation leaves it: a run with pre_plan tasks starts that stage then. */
export const asCreated = (stage: Stage): { status: string; statusTimestamps: Record<string, unknown> } =>
  stage === 'pre_plan'
    ? { status: 'running', statusTimestamps: { 'running-at': isoTimestamp() } }
    : { status: 'pending', statusTimestamps: {} };

export function expectTaskResult(resource: unknown, expected: ExpectedResult): string {
  const id = idOf(resource, ID.taskResult);
  const stage = { data: { id: expected.stageId, type: 'task-stages' } };
  expect(resource).toEqual({
    id,
    type: 'task-results',
    attributes: {
      message: null,
      status: expected.status ?? 'pending',
      'status-timestamps': expected.statusTimestamps ?? {},
      url: null,
      'created-at': isoTimestamp(),
      'updated-at': isoTimestamp(),
      'task-id': expected.taskId,
      'task-name': expected.taskName,
      'task-url': expected.taskUrl,
      stage: expected.stage,
      'is-speculative': expected.isSpeculative ?? false,
      'workspace-task-id': expected.workspaceTaskId,
      'workspace-task-enforcement-level': expected.enforcement,
      'agent-pool-id': null,
      'task-result-outcomes-count': expected.outcomesCount ?? 0,
    },
    relationships: { 'task-stage': stage, task_stage: stage },
    links: { self: `/api/v2/task-results/${id}` },
  });
  return id;
}

/** The workspace document as `include=…workspace` embeds it. */
export function expectWorkspace(resource: unknown, workspaceId: string, name: string, organization: string): void {
  expect(resource).toEqual({
    id: workspaceId,
    type: 'workspaces',
    attributes: expect.objectContaining({ name, 'created-at': isoTimestamp(), 'updated-at': isoTimestamp() }),
    relationships: { organization: { data: { id: organization, type: 'organizations' } } },
    links: {
      self: `/api/v2/organizations/${organization}/workspaces/${name}`,
      'self-html': `/app/${organization}/workspaces/${name}`,
    },
  });
}

/** HCP's body: go-tfe maps a 400 containing "Invalid include parameter" to ErrInvalidIncludeValue; the CLI checks the suffix. */
export function expectIncludeError(res: Response): void {
  const error = expectError(res, 400);
  expect({ title: error.title, detail: error.detail }).toEqual({ title: 'bad request', detail: 'Invalid include parameter' });
  expect(error.source).toEqual({ parameter: 'include' });
}
