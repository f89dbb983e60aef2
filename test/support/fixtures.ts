import type { EnforcementLevel, RunStage } from '@runtasks/shared/domain';
import type { Harness } from './harness.ts';

export const JSON_API = 'application/vnd.api+json';

export interface Fixture {
  organization: string;
  organizationToken: string;
  workspaceId: string;
  teamId: string;
}

let counter = 0;
/** Organization names (and the like) are global: every test takes its own. Jest gives each test file its own counter. */
export const uniqueName = (label: string): string => `${label}-${++counter}`;

type Method = 'get' | 'post' | 'patch' | 'delete' | 'put';

/**
 * Sends a JSON:API request with a bearer token and returns supertest's response, as it is: a 429 is
 * the caller's (the tests of the rate limiter itself). Other tests use `api`, which waits it out.
 */
export function impatientApi(h: Harness, method: Method, path: string, token?: string, body?: unknown) {
  let req = h.http[method](`/api/v2${path}`);
  if (token) req = req.set('Authorization', `Bearer ${token}`);
  if (body !== undefined) req = req.set('Content-Type', JSON_API).send(JSON.stringify(body));
  return req;
}

/** superagent's retry hooks, which its typings leave out. */
interface Resendable {
  retry(count: number, decide: (error: unknown, res?: { status: number; headers: Record<string, string> }) => boolean): unknown;
  _retry(): unknown;
}

/** How many 429s in a row a patient request waits out before it gives the 429 to its caller. */
const PATIENCE = 20;

/**
 * `request`, sent again after each 429 once its Retry-After has passed, as go-tfe and the CLI do. With
 * the default rate limit (30 a second per token, harness `ops: true`) a test that sets up many things
 * quickly meets the limiter; it waits like a real client instead of switching the limiter off.
 */
export function patiently<T>(request: T): T {
  const resendable = request as unknown as Resendable;
  let waitMs = 1000;
  resendable.retry(PATIENCE, (_error, res) => {
    if (res?.status !== 429) return false;
    waitMs = Math.max(1, Number(res.headers['retry-after'] ?? '1')) * 1000;
    return true;
  });
  const resend = resendable._retry.bind(resendable);
  resendable._retry = () => setTimeout(resend, waitMs);
  return request;
}

/**
 * Sends a JSON:API request with a bearer token and returns supertest's response, waiting out the rate
 * limit as a real client does (see `patiently`): suites run with the default limit (harness `ops: true`).
 */
export function api(h: Harness, method: Method, path: string, token?: string, body?: unknown) {
  return patiently(impatientApi(h, method, path, token, body));
}

export async function createOrganization(h: Harness, name: string, attributes: Record<string, unknown> = {}): Promise<string> {
  const res = await api(h, 'post', '/organizations', h.adminToken, {
    data: { type: 'organizations', attributes: { name, email: `${name}@example.test`, ...attributes } },
  });
  if (res.status !== 201) throw new Error(`create organization: ${res.status} ${res.text}`);
  return name;
}

export async function createOrganizationToken(h: Harness, organization: string): Promise<string> {
  const res = await api(h, 'post', `/organizations/${organization}/authentication-token`, h.adminToken);
  if (res.status !== 201) throw new Error(`create organization token: ${res.status} ${res.text}`);
  return res.body.data.attributes.token as string;
}

export async function createWorkspace(h: Harness, organization: string, token: string, name: string): Promise<string> {
  const res = await api(h, 'post', `/organizations/${organization}/workspaces`, token, {
    data: { type: 'workspaces', attributes: { name } },
  });
  if (res.status !== 201) throw new Error(`create workspace: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}

export async function createTeam(
  h: Harness,
  organization: string,
  token: string,
  name: string,
  access: Record<string, boolean> = {},
): Promise<string> {
  const res = await api(h, 'post', `/organizations/${organization}/teams`, token, {
    data: { type: 'teams', attributes: { name, 'organization-access': access } },
  });
  if (res.status !== 201) throw new Error(`create team: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}

export async function createTeamToken(h: Harness, token: string, teamId: string): Promise<string> {
  const res = await api(h, 'post', `/teams/${teamId}/authentication-token`, token);
  if (res.status !== 201) throw new Error(`create team token: ${res.status} ${res.text}`);
  return res.body.data.attributes.token as string;
}

export async function grantWorkspace(
  h: Harness,
  token: string,
  teamId: string,
  workspaceId: string,
  attributes: Record<string, unknown>,
): Promise<string> {
  const res = await api(h, 'post', '/team-workspaces', token, {
    data: {
      type: 'team-workspaces',
      attributes,
      relationships: { team: { data: { type: 'teams', id: teamId } }, workspace: { data: { type: 'workspaces', id: workspaceId } } },
    },
  });
  if (res.status !== 201) throw new Error(`grant workspace: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}

export async function createRun(h: Harness, token: string, workspaceId: string, attributes: Record<string, unknown> = {}): Promise<string> {
  const res = await api(h, 'post', '/runs', token, {
    data: { type: 'runs', attributes, relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } },
  });
  if (res.status !== 201) throw new Error(`create run: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}

/** A run task of `owner`'s organization calling `url`; no HMAC key unless given, a unique name unless given. */
export async function createTask(
  h: Harness,
  owner: Fixture,
  url: string,
  options: { hmacKey?: string | null; name?: string } = {},
): Promise<string> {
  const res = await api(h, 'post', `/organizations/${owner.organization}/tasks`, owner.organizationToken, {
    data: {
      type: 'tasks',
      attributes: { name: options.name ?? uniqueName('task'), url, category: 'task', 'hmac-key': options.hmacKey ?? null },
    },
  });
  if (res.status !== 201) throw new Error(`create task: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}

/** Attaches a task to a workspace (mandatory on post_plan unless told); the workspace task's id. */
export async function attachTask(
  h: Harness,
  owner: Fixture,
  workspaceId: string,
  taskId: string,
  enforcement: EnforcementLevel = 'mandatory',
  stages: RunStage[] = ['post_plan'],
): Promise<string> {
  const res = await api(h, 'post', `/workspaces/${workspaceId}/tasks`, owner.organizationToken, {
    data: {
      type: 'workspace-tasks',
      attributes: { 'enforcement-level': enforcement, stages },
      relationships: { task: { data: { type: 'tasks', id: taskId } } },
    },
  });
  if (res.status !== 201) throw new Error(`attach task: ${res.status} ${res.text}`);
  return res.body.data.id as string;
}

/** An organization with its owner token, a workspace and a team: the starting point of most tests. */
export async function seedOrganization(h: Harness, name: string): Promise<Fixture> {
  const organization = await createOrganization(h, name);
  const organizationToken = await createOrganizationToken(h, organization);
  const workspaceId = await createWorkspace(h, organization, organizationToken, `${name}-ws`);
  const teamId = await createTeam(h, organization, organizationToken, `${name}-team`);
  return { organization, organizationToken, workspaceId, teamId };
}

/** Polls until `check` returns a value or the deadline passes; never a fixed sleep. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000, intervalMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
