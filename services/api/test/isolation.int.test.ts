import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { DeliveryAttempt, TaskResultOutcome } from '@runtasks/shared/db';
import { CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROUTES } from '../src/routes/index.ts';
import type { RouteDef } from '../src/routes/define.ts';
import { configurationArchive } from '../../../test/support/archives.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { idsOf, type Response } from '../../../test/support/assertions.ts';

/**
 * The isolation matrix, generated from the route table: every token route is called without a
 * token, with garbage and revoked tokens, with another organization's owner token, with a team token
 * that has no permissions, and with nonexistent ids. A route with a path parameter (or a POST/PATCH
 * route without a request body) this file does not know fails the first test below, so a new route
 * cannot slip past the matrix. Site-admin routes answer every organization and team token like a
 * missing resource; the one public route with a body (the configuration upload URL, a bearer
 * capability) has its own tests below.
 */

const ORG_A = 'isolation-alpha';
const ORG_B = 'isolation-bravo';

/** Every path (and body) parameter the matrix can fill: a real value in A, and a value nothing has. */
const MISSING = {
  organization_name: 'no-such-name',
  workspace_name: 'no-such-name',
  workspace_id: 'ws-doesnotexist00000',
  team_id: 'team-doesnotexist000',
  id: 'tws-doesnotexist0000',
  run_id: 'run-doesnotexist0000',
  plan_id: 'plan-doesnotexist000',
  apply_id: 'apply-doesnotexist00',
  task_id: 'task-doesnotexist000',
  workspace_task_id: 'wstask-doesnotexist0',
  task_stage_id: 'ts-doesnotexist00000',
  task_result_id: 'taskrs-doesnotexist0',
  outcome_id: 'taskrso-doesnotexist',
  configuration_version_id: 'cv-doesnotexist0000',
  token_id: 'at-doesnotexist00000',
  comment_id: 'wsc-doesnotexist0000',
  tag_id: 'tag-doesnotexist0000',
  // The shape of a real upload token (rtup_ and 43 base64url characters) that no version has.
  upload_token: `rtup_${'doesnotexist'.padEnd(43, '0')}`,
} as const;
type ParamName = keyof typeof MISSING;
type Values = Record<ParamName, string>;
const KNOWN_PARAMS = Object.keys(MISSING) as ParamName[];
const isKnownParam = (name: string): name is ParamName => (KNOWN_PARAMS as string[]).includes(name);

/**
 * A valid-looking JSON:API body for every route that takes one, so a 404 comes from authorization
 * and never from validation. `params` names the ids the body refers to: the nonexistent-id variants
 * replace them like path parameters.
 */
interface BodySpec {
  params: ParamName[];
  body: (values: Values) => unknown;
}
const tokenBody: BodySpec = {
  params: [],
  body: () => ({ data: { type: 'authentication-tokens', attributes: { description: 'isolation' } } }),
};
const runActionBody: BodySpec = { params: [], body: () => ({ comment: 'isolation' }) };
/** Token routes that read their body raw, but a JSON one (a plan document): the matrix's JSON bodies fit them. */
const RAW_JSON_ROUTES = ['PUT /plans/:plan_id/json-output', 'PUT /runs/:run_id/plan/json-output'];
const planReportBody: BodySpec = { params: [], body: () => ({ format_version: '1.2', resource_changes: [] }) };
const errorReportBody: BodySpec = { params: [], body: () => ({ message: 'isolation' }) };
const finishReportBody: BodySpec = { params: [], body: () => ({}) };
const consumersBody: BodySpec = { params: [], body: (values) => ({ data: [{ type: 'workspaces', id: values.workspace_id }] }) };
/** The loopback task server the fixtures' run task verifies against (set in beforeAll). */
const taskServer = { url: '', requests: 0 };
const BODIES: Record<string, BodySpec> = {
  'PUT /plans/:plan_id/json-output': planReportBody,
  'PUT /runs/:run_id/plan/json-output': planReportBody,
  'POST /plans/:plan_id/actions/error': errorReportBody,
  'POST /runs/:run_id/plan/actions/error': errorReportBody,
  'POST /applies/:apply_id/actions/finish': finishReportBody,
  'POST /runs/:run_id/apply/actions/finish': finishReportBody,
  'POST /applies/:apply_id/actions/error': errorReportBody,
  'POST /runs/:run_id/apply/actions/error': errorReportBody,
  'POST /organizations': {
    params: [],
    body: () => ({ data: { type: 'organizations', attributes: { name: 'isolation-new-org', email: 'new@example.test' } } }),
  },
  'PATCH /organizations/:organization_name': {
    params: [],
    body: () => ({ data: { type: 'organizations', attributes: { email: 'changed@example.test', 'task-overrides-enabled': true } } }),
  },
  'POST /organizations/:organization_name/authentication-token': tokenBody,
  'POST /teams/:team_id/authentication-token': tokenBody,
  'POST /organizations/:organization_name/teams': {
    params: [],
    body: () => ({
      data: { type: 'teams', attributes: { name: 'isolation-new-team', 'organization-access': { 'manage-workspaces': true } } },
    }),
  },
  'PATCH /teams/:team_id': {
    params: [],
    body: () => ({ data: { type: 'teams', attributes: { name: 'renamed', 'organization-access': { 'manage-workspaces': true } } } }),
  },
  'POST /team-workspaces': {
    params: ['team_id', 'workspace_id'],
    body: (values) => ({
      data: {
        type: 'team-workspaces',
        attributes: { access: 'admin' },
        relationships: {
          team: { data: { type: 'teams', id: values.team_id } },
          workspace: { data: { type: 'workspaces', id: values.workspace_id } },
        },
      },
    }),
  },
  'PATCH /team-workspaces/:id': { params: [], body: () => ({ data: { type: 'team-workspaces', attributes: { access: 'admin' } } }) },
  'POST /organizations/:organization_name/workspaces': {
    params: [],
    body: () => ({ data: { type: 'workspaces', attributes: { name: 'isolation-new-ws' } } }),
  },
  'PATCH /organizations/:organization_name/workspaces/:workspace_name': {
    params: [],
    body: () => ({ data: { type: 'workspaces', attributes: { description: 'changed', 'auto-apply': true } } }),
  },
  'PATCH /workspaces/:workspace_id': {
    params: [],
    body: () => ({ data: { type: 'workspaces', attributes: { description: 'changed', 'auto-apply': true } } }),
  },
  'POST /runs': {
    params: ['workspace_id'],
    body: (values) => ({
      data: {
        type: 'runs',
        attributes: { message: 'isolation' },
        relationships: { workspace: { data: { type: 'workspaces', id: values.workspace_id } } },
      },
    }),
  },
  'POST /workspaces/:workspace_id/relationships/tags': {
    params: [],
    body: () => ({ data: [{ type: 'tags', attributes: { name: 'isolation-new-tag' } }] }),
  },
  // The body's workspace stays real: an unknown workspace there is a 422 naming it (its own tests), not a 404.
  'POST /tags/:tag_id/relationships/workspaces': {
    params: [],
    body: (values) => ({ data: [{ type: 'workspaces', id: values.workspace_id }] }),
  },
  'POST /runs/:run_id/comments': { params: [], body: () => ({ data: { type: 'comments', attributes: { body: 'isolation' } } }) },
  'POST /runs/:run_id/actions/apply': runActionBody,
  'POST /runs/:run_id/actions/cancel': runActionBody,
  'POST /runs/:run_id/actions/discard': runActionBody,
  'POST /configuration-versions/:configuration_version_id/actions/archive': finishReportBody,
  'POST /runs/:run_id/actions/force-execute': finishReportBody,
  'POST /runs/:run_id/actions/force-cancel': runActionBody,
  'POST /workspaces/:workspace_id/actions/lock': { params: [], body: () => ({ reason: 'isolation' }) },
  'POST /workspaces/:workspace_id/actions/unlock': finishReportBody,
  'POST /workspaces/:workspace_id/actions/force-unlock': finishReportBody,
  'POST /workspaces/:workspace_id/actions/safe-delete': finishReportBody,
  'POST /organizations/:organization_name/workspaces/:workspace_name/actions/safe-delete': finishReportBody,
  // The workspace itself: well-formed, and no caller of the matrix gets past the workspace's lookup to the 422 it would earn.
  'POST /workspaces/:workspace_id/relationships/remote-state-consumers': consumersBody,
  'PATCH /workspaces/:workspace_id/relationships/remote-state-consumers': consumersBody,
  'POST /organizations/:organization_name/tasks': {
    params: [],
    body: () => ({
      data: {
        type: 'tasks',
        attributes: { name: 'isolation-new-task', url: taskServer.url, category: 'task', description: null, enabled: true },
      },
    }),
  },
  'PATCH /tasks/:task_id': {
    params: [],
    body: () => ({ data: { type: 'tasks', attributes: { description: 'changed', enabled: false } } }),
  },
  'POST /workspaces/:workspace_id/tasks': {
    params: ['task_id'],
    body: (values) => ({
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'mandatory', stages: ['pre_plan'] },
        relationships: { task: { data: { type: 'tasks', id: values.task_id } } },
      },
    }),
  },
  'PATCH /workspaces/:workspace_id/tasks/:workspace_task_id': {
    params: [],
    body: () => ({ data: { type: 'workspace-tasks', attributes: { 'enforcement-level': 'mandatory', stages: ['pre_apply'] } } }),
  },
  // go-tfe sends plain JSON here, not a JSON:API document.
  'POST /task-stages/:task_stage_id/actions/override': { params: [], body: () => ({}) },
  'PATCH /task-results/:task_result_id/callback': {
    params: [],
    body: () => ({ data: { type: 'task-results', attributes: { status: 'passed', message: 'isolation' } } }),
  },
  'POST /workspaces/:workspace_id/configuration-versions': {
    params: [],
    body: () => ({ data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } } }),
  },
  // A setting A already has: the site admin's success changes nothing.
  'PATCH /admin/organizations/:organization_name': {
    params: [],
    body: () => ({ data: { type: 'organizations', attributes: { 'access-beta-tools': false } } }),
  },
  // go-tfe sends the singular type. A's edition already is Business's (standard, global run tasks): the site admin's success changes nothing.
  'POST /admin/organizations/:organization_name/subscription': {
    params: [],
    body: () => ({
      data: { type: 'subscription', relationships: { 'feature-set': { data: { type: 'feature-sets', id: 'fs-business' } } } },
    }),
  },
};

/** Writes that change nothing with the real values, proving a parameter that no GET route takes. */
const PROVEN_BY_IDEMPOTENT_WRITE = ['POST /tags/:tag_id/relationships/workspaces'];

/** Routes anyone may call without a token; anything else must be 'token', 'token-or-task' or 'callback'. */
const UPLOAD_ROUTE = 'PUT /uploads/configuration-versions/:upload_token';
const PUBLIC_ROUTES: Record<string, string> = {
  'GET /ping': 'go-tfe pings before it sends a token; the answer carries only version headers',
  [UPLOAD_ROUTE]:
    'go-tfe PUTs the archive without a token: the upload URL itself is the credential, a single-use, expiring ' +
    'bearer capability (see "the public upload URL" below: unknown, used and expired URLs are the one 404)',
};
/** Public routes that take a body: each has its own tests here (the matrix sends no body to public routes). */
const PUBLIC_ROUTES_WITH_OWN_TESTS = [UPLOAD_ROUTE];

/**
 * Routes ('callback') a task server calls with a task result's own access token: no API token of any
 * kind (site admin included) is a credential there, so every one of them gets the same 401.
 */
const TASK_TOKEN_ONLY_ROUTES: Record<string, string> = {
  'PATCH /task-results/:task_result_id/callback': "a task server reports its verdict with that result's access token only",
};

interface Allowed {
  reason: string;
  /** Checks the successful answer, including that nothing beyond what the caller may see leaks. */
  check: (res: Response) => void;
}

/**
 * Routes the team without any permissions may legitimately use. Every other token route must answer
 * it exactly like a missing resource.
 */
const NO_PERMISSION_TEAM_MAY_USE: Record<string, Allowed> = {
  'GET /organizations': {
    reason: 'every member lists the organizations it belongs to (its own only)',
    check: (res) => expect(idsOf(res)).toEqual([ORG_A]),
  },
  'GET /organizations/:organization_name': {
    reason: 'every member reads its own organization (go-tfe does on client setup)',
    check: (res) => expect(res.body.data.id).toBe(ORG_A),
  },
  'GET /organizations/:organization_name/entitlement-set': {
    reason: 'every member reads what its organization is entitled to',
    check: (res) => expect(res.body.data.type).toBe('entitlement-sets'),
  },
  'GET /organizations/:organization_name/workspaces': {
    reason: 'every member lists workspaces, but sees only those its teams can read: none here',
    check: (res) => {
      expect(res.body.data).toEqual([]);
      expect(res.body.meta.pagination['total-count']).toBe(0);
    },
  },
  'GET /organizations/:organization_name/tags': {
    reason: "every member lists its organization's tags (names and counts, no workspace)",
    check: (res) => expect(res.body.data.map((tag: { attributes: { name: string } }) => tag.attributes.name)).toEqual(['isolation-tag']),
  },
  'GET /team-workspaces': {
    reason: 'a root collection addressed by no id: it answers with what the caller may see, nothing for this team',
    check: (res) => {
      expect(res.body.data).toEqual([]);
      expect(res.body.meta.pagination['total-count']).toBe(0);
    },
  },
};

/**
 * The explicit decision for every run task route (and every configuration version and site-admin
 * route): the team without permissions may use none of them. Each needs a permission that team lacks;
 * the route table test below requires every route of those families to be listed here, so a new one
 * cannot default into (or out of) the matrix silently.
 */
const NEEDS_MANAGE_RUN_TASKS = 'needs the organization permission "manage run tasks"';
const NEEDS_WORKSPACE_RUN_TASKS = 'needs workspace access with "run-tasks" on the workspace';
const NEEDS_RUN_READ = "needs read access to the run's workspace";
const NEEDS_WORKSPACE_RUNS_READ = 'needs workspace access that may read runs';
const NEEDS_WORKSPACE_RUNS_PLAN = 'needs workspace access that may plan runs';
const SITE_ADMIN = 'site admin only';
const NO_PERMISSION_TEAM_DENIED: Record<string, string> = {
  'POST /organizations/:organization_name/tasks': NEEDS_MANAGE_RUN_TASKS,
  'GET /organizations/:organization_name/tasks': NEEDS_MANAGE_RUN_TASKS,
  'GET /tasks/:task_id': NEEDS_MANAGE_RUN_TASKS,
  'PATCH /tasks/:task_id': NEEDS_MANAGE_RUN_TASKS,
  'DELETE /tasks/:task_id': NEEDS_MANAGE_RUN_TASKS,
  'POST /workspaces/:workspace_id/tasks': NEEDS_WORKSPACE_RUN_TASKS,
  'GET /workspaces/:workspace_id/tasks': NEEDS_WORKSPACE_RUN_TASKS,
  'GET /workspaces/:workspace_id/tasks/:workspace_task_id': NEEDS_WORKSPACE_RUN_TASKS,
  'PATCH /workspaces/:workspace_id/tasks/:workspace_task_id': NEEDS_WORKSPACE_RUN_TASKS,
  'DELETE /workspaces/:workspace_id/tasks/:workspace_task_id': NEEDS_WORKSPACE_RUN_TASKS,
  'GET /runs/:run_id/task-stages': NEEDS_RUN_READ,
  'GET /task-stages/:task_stage_id': NEEDS_RUN_READ,
  'POST /task-stages/:task_stage_id/actions/override': `${NEEDS_RUN_READ} and "manage policy overrides"`,
  'GET /task-results/:task_result_id': NEEDS_RUN_READ,
  'GET /task-results/:task_result_id/outcomes': NEEDS_RUN_READ,
  'GET /task-results/:task_result_id/delivery-attempts': NEEDS_RUN_READ,
  'GET /task-result-outcomes/:outcome_id': NEEDS_RUN_READ,
  // Configuration versions and the site-admin routes: the team without permissions may use none of them either.
  'POST /workspaces/:workspace_id/configuration-versions': NEEDS_WORKSPACE_RUNS_PLAN,
  'GET /workspaces/:workspace_id/configuration-versions': NEEDS_WORKSPACE_RUNS_READ,
  'GET /configuration-versions/:configuration_version_id': NEEDS_WORKSPACE_RUNS_READ,
  'GET /configuration-versions/:configuration_version_id/download': NEEDS_WORKSPACE_RUNS_READ,
  'POST /configuration-versions/:configuration_version_id/actions/archive': NEEDS_WORKSPACE_RUNS_PLAN,
  'GET /admin/feature-sets': SITE_ADMIN,
  'POST /admin/organizations/:organization_name/subscription': SITE_ADMIN,
  'GET /admin/organizations': SITE_ADMIN,
  'GET /admin/organizations/:organization_name': SITE_ADMIN,
  'PATCH /admin/organizations/:organization_name': SITE_ADMIN,
  'DELETE /admin/organizations/:organization_name': SITE_ADMIN,
};
const isRunTaskRoute = (route: RouteDef): boolean => /\/(tasks|task-stages|task-results|task-result-outcomes)(\/|$)/.test(route.path);

interface AdminAllowed extends Allowed {
  status: number;
  /** Parameters of the site admin's own call, instead of the real ones (a delete aims at an organization of its own). */
  values?: (h: Harness) => Promise<Partial<Values>>;
}

const DISPOSABLE_ORG = 'isolation-disposable';

/**
 * Site-admin routes: every organization token (A's owner included) and every team token (even one
 * with every organization permission) gets the same 404 as a missing resource; the site admin succeeds.
 * Every /admin route must be listed here.
 */
const SITE_ADMIN_ONLY: Record<string, AdminAllowed> = {
  'GET /admin/feature-sets': {
    reason: 'the site admin lists the feature sets',
    status: 200,
    check: (res) => {
      expect(res.body.data.map((set: { type: string }) => set.type)).toEqual(res.body.data.map(() => 'feature-sets'));
      expect(idsOf(res)).toContain('fs-business');
      expect(res.body.meta.pagination['total-count']).toBe(res.body.data.length);
    },
  },
  'POST /admin/organizations/:organization_name/subscription': {
    reason: 'the site admin subscribes A to the feature set it already has',
    status: 201,
    check: (res) => {
      expect(res.body.data.type).toBe('subscriptions');
      expect(res.body.data.relationships).toEqual({
        organization: { data: { type: 'organizations', id: ORG_A } },
        'feature-set': { data: { type: 'feature-sets', id: 'fs-business' } },
      });
    },
  },
  'GET /admin/organizations': {
    reason: 'the site admin lists every organization',
    status: 200,
    check: (res) => expect(idsOf(res)).toEqual(expect.arrayContaining([ORG_A, ORG_B])),
  },
  'GET /admin/organizations/:organization_name': {
    reason: 'the site admin shows A',
    status: 200,
    check: (res) => expect(res.body.data).toMatchObject({ id: ORG_A, type: 'organizations' }),
  },
  'PATCH /admin/organizations/:organization_name': {
    reason: 'the site admin sets a setting A already has',
    status: 200,
    check: (res) => expect(res.body.data.attributes).toMatchObject({ name: ORG_A, 'access-beta-tools': false }),
  },
  'DELETE /admin/organizations/:organization_name': {
    reason: 'the site admin deletes an organization made for this call, so that the matrix keeps A',
    status: 204,
    values: async (h) => {
      await createOrganization(h, DISPOSABLE_ORG);
      return { organization_name: DISPOSABLE_ORG };
    },
    check: (res) => expect(res.text).toBe(''),
  },
};
const isAdminRoute = (route: RouteDef): boolean => route.path.startsWith('/admin/');
const isConfigurationVersionRoute = (route: RouteDef): boolean => route.path.includes('configuration-versions');

/** Root collections (no id in the path) answer another organization's owner with its own data only. */
const OTHER_OWNER_MAY_USE: Record<string, Allowed> = {
  'GET /organizations': {
    reason: 'an owner lists its own organization only',
    check: (res) => expect(idsOf(res)).toEqual([ORG_B]),
  },
  'GET /team-workspaces': {
    reason: 'a root collection addressed by no id: organization B has no team access rows',
    check: (res) => {
      expect(res.body.data).toEqual([]);
      expect(res.body.meta.pagination['total-count']).toBe(0);
    },
  },
};

const keyOf = (route: RouteDef): string => `${route.method} ${route.path}`;
const pathParams = (route: RouteDef): string[] => [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1] ?? '');
const takesBody = (route: RouteDef): boolean => ['POST', 'PATCH', 'PUT'].includes(route.method);

function paramsOf(route: RouteDef): ParamName[] {
  const names = [...pathParams(route), ...(BODIES[keyOf(route)]?.params ?? [])];
  return names.map((name) => {
    if (!isKnownParam(name))
      throw new Error(`${keyOf(route)}: the isolation matrix cannot fill :${name}; add it to MISSING and to the fixtures`);
    return name;
  });
}

function fill(route: RouteDef, values: Values): string {
  return route.path.replaceAll(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
    if (!isKnownParam(name)) throw new Error(`${keyOf(route)}: the isolation matrix cannot fill :${name}`);
    return encodeURIComponent(values[name]);
  });
}

function bodyOf(route: RouteDef, values: Values): unknown {
  if (!takesBody(route)) return undefined;
  const spec = BODIES[keyOf(route)];
  if (!spec) throw new Error(`${keyOf(route)}: the isolation matrix has no request body for this route; add one to BODIES`);
  return spec.body(values);
}

/** Read as a string: the matrix must also recognise (and reject) auth kinds it does not know yet. */
const authOf = (route: RouteDef): string => route.auth;
/** Routes taking API tokens: 'token-or-task' ones also take a task result's access token (checked below). */
const TOKEN_ROUTES = ROUTES.filter((route) => authOf(route) === 'token' || authOf(route) === 'token-or-task');
const CALLBACK_ROUTES = ROUTES.filter((route) => authOf(route) === 'callback');
const KNOWN_AUTH = ['public', 'token', 'token-or-task', 'callback'];

/** The upload limit of this file's API (CONFIGURATION_VERSION_MAX_BYTES): small, so an oversize upload is cheap. */
const MAX_UPLOAD_BYTES = 16 * 1024;

describe('isolation matrix', () => {
  let h: Harness;
  let a: Fixture;
  let b: Fixture;
  let revokedToken: string;
  let noPermissionTeamToken: string;
  let grantedTeamId: string;
  let real: Values;
  let notFoundText: string;
  let unauthorizedText: string;
  let stateBefore: string;
  let requestsSent = 0;
  let server: Server | undefined;
  let taskRequestsBefore: number;
  /** A live access token of a task result in organization B. */
  let otherTaskToken: string;
  /** A's team with every organization permission: still no site admin. */
  let allAccessTeamToken: string;
  /** The token of A's team with read access to A's workspace (it may read runs, not plan them). */
  let readTeamToken: string;
  let allAccessTeamId: string;
  /** The archive uploaded to real.configuration_version_id. */
  let archive: Buffer;
  /** Upload tokens that name no usable URL any more: an archived version's, and an expired one. */
  let usedUploadToken: string;
  let expiredUploadToken: string;
  /** The version whose upload URL (real.upload_token) the last tests use; pending until then. */
  let pendingVersionId: string;
  /** Live access tokens of task results of A's runs: one on a run that uses the version, one on a run that does not. */
  let versionTaskToken: string;
  let plainTaskToken: string;

  /** Everything the failing requests must leave alone (api_tokens minus last_used_at bookkeeping). */
  async function snapshot(): Promise<string> {
    const connection = h.orm.em.fork().getConnection();
    const tables = [
      'organizations',
      'workspaces',
      'teams',
      'team_workspaces',
      'runs',
      'run_tasks',
      'workspace_tasks',
      'task_stages',
      'task_results',
      'task_result_outcomes',
      'delivery_attempts',
      'outbox_events',
      'configuration_versions',
      'run_comments',
      'workspace_remote_state_consumers',
      'tags',
      'workspace_tags',
    ];
    const rows: string[] = [];
    for (const table of tables) {
      const [row] = await connection.execute<{ n: string; digest: string | null }[]>(
        `select count(*) as n, md5(string_agg(t::text, '|' order by t::text)) as digest from ${table} t`,
      );
      rows.push(`${table}: ${row?.n} ${row?.digest}`);
    }
    const [tokens] = await connection.execute<{ n: string; active: string; digest: string | null }[]>(
      `select count(*) as n, count(*) filter (where revoked_at is null) as active,
              md5(string_agg(concat_ws(',', id, kind, organization_id, team_id, revoked_at, expires_at), '|' order by id)) as digest
         from api_tokens`,
    );
    rows.push(`api_tokens: ${tokens?.n} ${tokens?.active} ${tokens?.digest}`);
    return rows.join('\n');
  }

  function call(route: RouteDef, values: Values, authorization?: string) {
    requestsSent += 1;
    let req = h.http[route.method.toLowerCase() as 'get' | 'post' | 'patch' | 'put' | 'delete'](`/api/v2${fill(route, values)}`);
    if (authorization !== undefined) req = req.set('Authorization', authorization);
    const body = bodyOf(route, values);
    if (body !== undefined) req = req.set('Content-Type', JSON_API).send(JSON.stringify(body));
    return req;
  }

  const uploadPath = (token: string): string => `/api/v2/uploads/configuration-versions/${token}`;

  /** A token-less PUT of bytes to an upload URL, as go-tfe sends it. */
  function upload(token: string, bytes: Buffer, authorization?: string) {
    requestsSent += 1;
    let req = h.http.put(uploadPath(token)).set('Content-Type', 'application/octet-stream');
    if (authorization !== undefined) req = req.set('Authorization', authorization);
    return req.send(bytes);
  }

  /** The download route's answer, its body as bytes (the archive) whatever the content type. */
  function download(id: string, authorization?: string) {
    requestsSent += 1;
    let req = h.http.get(`/api/v2/configuration-versions/${encodeURIComponent(id)}/download`);
    if (authorization !== undefined) req = req.set('Authorization', authorization);
    return req.buffer(true).parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
  }

  /** A JSON:API answer's text from a download response (parsed as bytes above). */
  const textOf = (res: Response): string => (Buffer.isBuffer(res.body) ? res.body.toString('utf8') : res.text);

  /** Real values with one parameter (or, last, every parameter) replaced by a value nothing has. */
  function missingVariants(route: RouteDef): { label: string; values: Values }[] {
    const params = [...new Set(paramsOf(route))];
    const variants = params.map((param) => ({ label: `:${param} missing`, values: { ...real, [param]: MISSING[param] } }));
    if (params.length > 1) variants.push({ label: 'all missing', values: { ...MISSING } });
    return variants;
  }

  function expectNotFound(res: Response, context: string): void {
    expect({ context, status: res.status, text: res.text }).toEqual({ context, status: 404, text: notFoundText });
    expect(res.headers['content-type']).toContain(JSON_API);
  }

  function expectUnauthorized(res: Response, context: string): void {
    expect({ context, status: res.status, text: res.text }).toEqual({ context, status: 401, text: unauthorizedText });
    expect(res.headers['content-type']).toContain(JSON_API);
  }

  /** Nothing of A's beyond what the caller may see appears in an allowed answer. */
  function expectNoLeak(res: Response, hidden: string[]): void {
    for (const secret of hidden) expect(res.text).not.toContain(secret);
  }

  beforeAll(async () => {
    h = await startHarness({ env: { CONFIGURATION_VERSION_MAX_BYTES: String(MAX_UPLOAD_BYTES) } });
    a = await seedOrganization(h, ORG_A);
    b = await seedOrganization(h, ORG_B);
    // Issuing a new organization token revokes the previous one: B's first token is now revoked.
    revokedToken = b.organizationToken;
    b = { ...b, organizationToken: await createOrganizationToken(h, ORG_B) };
    // seedOrganization's team has no organization permissions and no workspace access.
    noPermissionTeamToken = await createTeamToken(h, a.organizationToken, a.teamId);
    grantedTeamId = await createTeam(h, ORG_A, a.organizationToken, `${ORG_A}-granted`);
    const teamWorkspaceId = await grantWorkspace(h, a.organizationToken, grantedTeamId, a.workspaceId, { access: 'read' });
    readTeamToken = await createTeamToken(h, a.organizationToken, grantedTeamId);
    allAccessTeamId = await createTeam(h, ORG_A, a.organizationToken, `${ORG_A}-all-access`, {
      'manage-run-tasks': true,
      'manage-workspaces': true,
      'manage-policy-overrides': true,
    });
    allAccessTeamToken = await createTeamToken(h, a.organizationToken, allAccessTeamId);
    // A task server that acknowledges the verification request of the run task below.
    const listening = createServer((req, res) => {
      taskServer.requests += 1;
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    server = listening;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', () => resolve()));
    taskServer.url = `http://127.0.0.1:${(listening.address() as AddressInfo).port}/task`;
    const task = await api(h, 'post', `/organizations/${ORG_A}/tasks`, a.organizationToken, {
      data: { type: 'tasks', attributes: { name: 'isolation-task', url: taskServer.url, category: 'task' } },
    });
    if (task.status !== 201) throw new Error(`create run task: ${task.status} ${task.text}`);
    const taskId = task.body.data.id as string;
    const association = await api(h, 'post', `/workspaces/${a.workspaceId}/tasks`, a.organizationToken, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'advisory', stages: ['post_plan'] },
        relationships: { task: { data: { type: 'tasks', id: taskId } } },
      },
    });
    if (association.status !== 201) throw new Error(`associate run task: ${association.status} ${association.text}`);
    // Created after the association, so the run has a post_plan task stage holding one task result.
    const runId = await createRun(h, a.organizationToken, a.workspaceId, { message: 'isolation' });
    const run = await api(h, 'get', `/runs/${runId}?include=task_stages`, a.organizationToken);
    if (run.status !== 200) throw new Error(`read run: ${run.status} ${run.text}`);
    const [stage] = run.body.included as { id: string; relationships: { 'task-results': { data: { id: string }[] } } }[];
    const resultId = stage?.relationships['task-results'].data[0]?.id;
    if (!stage || !resultId) throw new Error(`the run has no task stage with a result: ${run.text}`);
    const em = h.orm.em.fork();
    const outcome = em.create(TaskResultOutcome, {
      id: newId('taskResultOutcome'),
      taskResult: resultId,
      outcomeId: 'isolation-outcome',
      description: 'isolation outcome',
      body: 'isolation body',
      url: 'https://example.test/isolation',
      tags: {},
    });
    // A delivery attempt of that result, so its delivery-attempts route has something to hide.
    em.create(DeliveryAttempt, {
      taskResult: resultId,
      attempt: 1,
      startedAt: new Date(),
      durationMs: 12,
      httpStatus: 200,
      errorKind: null,
      responseExcerpt: 'isolation',
    });
    await em.flush();
    // Configuration versions in A's workspace, through the API: one with a real archive (uploaded through
    // its URL, so the download route has data), one whose URL expired, and one still pending.
    const createVersion = async (): Promise<{ id: string; token: string }> => {
      const res = await api(h, 'post', `/workspaces/${a.workspaceId}/configuration-versions`, a.organizationToken, {
        data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
      });
      if (res.status !== 201) throw new Error(`create configuration version: ${res.status} ${res.text}`);
      const url = new URL(String(res.body.data.attributes['upload-url']));
      const token = url.pathname.slice(uploadPath('').length);
      if (url.pathname !== uploadPath(token) || token.length === 0) throw new Error(`unexpected upload URL ${url.href}`);
      return { id: res.body.data.id as string, token };
    };
    archive = configurationArchive('resource "null_resource" "isolation" {}\n');
    const uploadTo = async (token: string): Promise<void> => {
      const uploaded = await h.http.put(uploadPath(token)).set('Content-Type', 'application/octet-stream').send(archive);
      if (uploaded.status !== 200) throw new Error(`upload the archive: ${uploaded.status} ${uploaded.text}`);
    };
    // An archived version (archived once a newer one is uploaded): its URL is used up for good.
    const archived = await createVersion();
    await uploadTo(archived.token);
    const version = await createVersion();
    await uploadTo(version.token);
    const archiving = await api(h, 'post', `/configuration-versions/${archived.id}/actions/archive`, a.organizationToken);
    if (archiving.status !== 202) throw new Error(`archive a configuration version: ${archiving.status} ${archiving.text}`);
    usedUploadToken = archived.token;
    const expired = await createVersion();
    await em.execute(`update configuration_versions set upload_expires_at = now() - interval '1 second' where id = ?`, [expired.id]);
    expiredUploadToken = expired.token;
    const pending = await createVersion();
    pendingVersionId = pending.id;
    // A comment on A's run, so the comment routes have something to hide.
    const commentOn = async (id: string): Promise<string> => {
      const res = await api(h, 'post', `/runs/${id}/comments`, a.organizationToken, {
        data: { type: 'comments', attributes: { body: 'isolation' } },
      });
      if (res.status !== 201) throw new Error(`comment on A's run: ${res.status} ${res.text}`);
      return res.body.data.id as string;
    };
    // A tag on A's workspace, so the tag routes have something to hide.
    const tagged = await api(h, 'post', `/workspaces/${a.workspaceId}/relationships/tags`, a.organizationToken, {
      data: [{ type: 'tags', attributes: { name: 'isolation-tag' } }],
    });
    if (tagged.status !== 204) throw new Error(`tag A's workspace: ${tagged.status} ${tagged.text}`);
    const tags = await api(h, 'get', `/workspaces/${a.workspaceId}/relationships/tags`, a.organizationToken);
    real = {
      organization_name: ORG_A,
      workspace_name: `${ORG_A}-ws`,
      workspace_id: a.workspaceId,
      team_id: a.teamId,
      id: teamWorkspaceId,
      run_id: runId,
      plan_id: run.body.data.relationships.plan.data.id as string,
      apply_id: run.body.data.relationships.apply.data.id as string,
      task_id: taskId,
      workspace_task_id: association.body.data.id as string,
      task_stage_id: stage.id,
      task_result_id: resultId,
      outcome_id: outcome.id,
      configuration_version_id: version.id,
      token_id: (await api(h, 'get', `/organizations/${ORG_A}/authentication-token`, a.organizationToken)).body.data.id as string,
      comment_id: await commentOn(runId),
      tag_id: tags.body.data[0].id as string,
      upload_token: pending.token,
    };
    // Organization B's own task result, with a live access token as the worker would give it.
    const otherTask = await api(h, 'post', `/organizations/${ORG_B}/tasks`, b.organizationToken, {
      data: { type: 'tasks', attributes: { name: 'isolation-task', url: taskServer.url, category: 'task' } },
    });
    if (otherTask.status !== 201) throw new Error(`create B's run task: ${otherTask.status} ${otherTask.text}`);
    const otherAssociation = await api(h, 'post', `/workspaces/${b.workspaceId}/tasks`, b.organizationToken, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'advisory' },
        relationships: { task: { data: { type: 'tasks', id: otherTask.body.data.id } } },
      },
    });
    if (otherAssociation.status !== 201) throw new Error(`associate B's run task: ${otherAssociation.status} ${otherAssociation.text}`);
    const otherRun = await createRun(h, b.organizationToken, b.workspaceId, { message: 'isolation' });
    otherTaskToken = generateToken(CALLBACK_TOKEN_PREFIX);
    const [marked] = await em.execute<{ id: string }[]>(
      `update task_results set callback_token_hash = ?
        where task_stage_id in (select id from task_stages where run_id = ?) returning id`,
      [h.secrets.hashToken(otherTaskToken), otherRun],
    );
    if (!marked) throw new Error("B's run has no task result");
    // Two more runs in A, each with a live task access token: one on the configuration version, one not.
    const liveTaskToken = async (configurationVersionId?: string): Promise<string> => {
      const res = await api(h, 'post', '/runs', a.organizationToken, {
        data: {
          type: 'runs',
          attributes: { message: 'isolation' },
          relationships: {
            workspace: { data: { type: 'workspaces', id: a.workspaceId } },
            ...(configurationVersionId
              ? { 'configuration-version': { data: { type: 'configuration-versions', id: configurationVersionId } } }
              : {}),
          },
        },
      });
      if (res.status !== 201) throw new Error(`create A's run: ${res.status} ${res.text}`);
      const token = generateToken(CALLBACK_TOKEN_PREFIX);
      const [row] = await em.execute<{ id: string }[]>(
        `update task_results set callback_token_hash = ?
          where task_stage_id in (select id from task_stages where run_id = ?) returning id`,
        [h.secrets.hashToken(token), res.body.data.id],
      );
      if (!row) throw new Error("A's run has no task result");
      return token;
    };
    versionTaskToken = await liveTaskToken(version.id);
    plainTaskToken = await liveTaskToken();
    // A remote state consumer of A's workspace, so the consumer routes have a link to keep.
    const consumer = await createWorkspace(h, ORG_A, a.organizationToken, `${ORG_A}-consumer`);
    const consumers = await api(h, 'post', `/workspaces/${a.workspaceId}/relationships/remote-state-consumers`, a.organizationToken, {
      data: [{ type: 'workspaces', id: consumer }],
    });
    if (consumers.status !== 204) throw new Error(`add a remote state consumer: ${consumers.status} ${consumers.text}`);
    taskRequestsBefore = taskServer.requests;
    notFoundText = (await api(h, 'get', `/workspaces/${MISSING.workspace_id}`, a.organizationToken)).text;
    unauthorizedText = (await api(h, 'get', '/organizations')).text;
    stateBefore = await snapshot();
  });

  afterAll(async () => {
    await h?.close();
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  describe('route table', () => {
    it('knows how to fill every parameter and body of every route', () => {
      const problems: string[] = [];
      for (const route of ROUTES) {
        for (const name of pathParams(route)) if (!isKnownParam(name)) problems.push(`${keyOf(route)}: unknown parameter :${name}`);
        if (route.auth === 'token' && takesBody(route) && !BODIES[keyOf(route)])
          problems.push(`${keyOf(route)}: no request body in BODIES`);
        if (route.auth === 'public' && !PUBLIC_ROUTES[keyOf(route)])
          problems.push(`${keyOf(route)}: public but not listed in PUBLIC_ROUTES`);
        if (route.auth === 'public' && takesBody(route) && !PUBLIC_ROUTES_WITH_OWN_TESTS.includes(keyOf(route)))
          problems.push(`${keyOf(route)}: a public route with a body needs tests of its own here`);
        if (route.body === 'raw' && route.auth !== 'public' && !RAW_JSON_ROUTES.includes(keyOf(route)))
          problems.push(`${keyOf(route)}: a raw body on a ${route.auth} route; the matrix sends JSON bodies only`);
        if (isAdminRoute(route) && !SITE_ADMIN_ONLY[keyOf(route)])
          problems.push(`${keyOf(route)}: a site-admin route not listed in SITE_ADMIN_ONLY`);
        if (authOf(route) === 'callback' && !TASK_TOKEN_ONLY_ROUTES[keyOf(route)])
          problems.push(`${keyOf(route)}: callback but not listed in TASK_TOKEN_ONLY_ROUTES`);
        if (authOf(route) === 'callback' && takesBody(route) && !BODIES[keyOf(route)])
          problems.push(`${keyOf(route)}: no request body in BODIES`);
        if (!KNOWN_AUTH.includes(authOf(route))) problems.push(`${keyOf(route)}: auth '${authOf(route)}' unknown to the matrix`);
      }
      expect(problems).toEqual([]);
    });

    it('lists no stale exceptions or bodies (every key names a route)', () => {
      const keys = new Set(ROUTES.map(keyOf));
      const listed = [
        ...Object.keys(BODIES),
        ...Object.keys(PUBLIC_ROUTES),
        ...Object.keys(NO_PERMISSION_TEAM_MAY_USE),
        ...Object.keys(OTHER_OWNER_MAY_USE),
        ...Object.keys(NO_PERMISSION_TEAM_DENIED),
        ...Object.keys(TASK_TOKEN_ONLY_ROUTES),
        ...Object.keys(SITE_ADMIN_ONLY),
        ...PUBLIC_ROUTES_WITH_OWN_TESTS,
        ...PROVEN_BY_IDEMPOTENT_WRITE,
      ];
      expect(listed.filter((key) => !keys.has(key))).toEqual([]);
      expect(ROUTES.filter((route) => !KNOWN_AUTH.includes(authOf(route)))).toEqual([]);
      expect(Object.keys(TASK_TOKEN_ONLY_ROUTES).filter((key) => !CALLBACK_ROUTES.some((route) => keyOf(route) === key))).toEqual([]);
      expect(TOKEN_ROUTES.length).toBeGreaterThan(0);
      expect(PUBLIC_ROUTES_WITH_OWN_TESTS.filter((key) => !PUBLIC_ROUTES[key])).toEqual([]);
      expect(Object.keys(SITE_ADMIN_ONLY).filter((key) => !TOKEN_ROUTES.some((route) => keyOf(route) === key))).toEqual([]);
    });

    it('decides explicitly for every run task route that the team without permissions may not use it', () => {
      const runTaskRoutes = TOKEN_ROUTES.filter(isRunTaskRoute).map(keyOf);
      expect(runTaskRoutes.length).toBeGreaterThanOrEqual(17);
      expect(runTaskRoutes).toContain('GET /task-results/:task_result_id/delivery-attempts');
      expect(runTaskRoutes.filter((key) => !NO_PERMISSION_TEAM_DENIED[key])).toEqual([]);
      // …and for every configuration version and site-admin route.
      const otherFamilies = TOKEN_ROUTES.filter((route) => isConfigurationVersionRoute(route) || isAdminRoute(route)).map(keyOf);
      expect(otherFamilies.length).toBeGreaterThanOrEqual(6);
      expect(otherFamilies.filter((key) => !NO_PERMISSION_TEAM_DENIED[key])).toEqual([]);
      expect(Object.keys(NO_PERMISSION_TEAM_DENIED).filter((key) => NO_PERMISSION_TEAM_MAY_USE[key])).toEqual([]);
      expect(Object.keys(NO_PERMISSION_TEAM_MAY_USE).filter((key) => runTaskRoutes.includes(key))).toEqual([]);
    });

    it('has fixtures for every parameter: A owner (the site admin on site-admin routes) reads every GET route with real values', async () => {
      const used = new Set<ParamName>();
      for (const route of TOKEN_ROUTES.filter((candidate) => candidate.method === 'GET')) {
        const token = SITE_ADMIN_ONLY[keyOf(route)] ? h.adminToken : a.organizationToken;
        const res = await call(route, real, `Bearer ${token}`);
        expect({ route: keyOf(route), status: res.status }).toEqual({ route: keyOf(route), status: 200 });
        for (const param of paramsOf(route)) used.add(param);
      }
      // A tag has no GET route of its own (nor has it in HCP): tagging A's workspace with the tag it already
      // has proves the tag real and changes nothing (the snapshot at the end says so).
      for (const route of TOKEN_ROUTES.filter((candidate) => PROVEN_BY_IDEMPOTENT_WRITE.includes(keyOf(candidate)))) {
        const res = await call(route, real, `Bearer ${a.organizationToken}`);
        expect({ route: keyOf(route), status: res.status }).toEqual({ route: keyOf(route), status: 204 });
        for (const param of paramsOf(route)) used.add(param);
      }
      // Every parameter kind a mutating route uses was proven real by some GET route above.
      const all = new Set([...TOKEN_ROUTES, ...CALLBACK_ROUTES].flatMap(paramsOf));
      expect([...all].filter((param) => !used.has(param))).toEqual([]);
    });

    it('one 404 body for an unknown route and a missing resource, one 401 body', async () => {
      expect(JSON.parse(notFoundText)).toEqual({ errors: [{ status: '404', title: 'not found' }] });
      const unknown = await api(h, 'get', '/no-such-route', a.organizationToken);
      expectNotFound(unknown, 'unknown route');
      expect(JSON.parse(unauthorizedText)).toEqual({ errors: [{ status: '401', title: 'unauthorized' }] });
    });
  });

  const garbage = (): [string, string][] => [
    ['garbage bearer token', `Bearer rtk_${randomBytes(32).toString('base64url')}`],
    ['garbage token without the prefix', `Bearer ${randomBytes(32).toString('base64url')}`],
    ['garbage task access token', `Bearer ${generateToken(CALLBACK_TOKEN_PREFIX)}`],
    ['basic credentials', `Basic ${Buffer.from('admin:admin').toString('base64')}`],
    ["A's real token under another scheme", `Token ${a.organizationToken}`],
    ["A's real token without a scheme", a.organizationToken],
    ['empty bearer', 'Bearer '],
    ["B's revoked token", `Bearer ${revokedToken}`],
  ];

  describe.each(TOKEN_ROUTES.map((route) => [keyOf(route), route] as const))('%s', (key, route) => {
    it('no token → 401, for real and for missing ids', async () => {
      expectUnauthorized(await call(route, real), 'real ids');
      for (const variant of missingVariants(route)) expectUnauthorized(await call(route, variant.values), variant.label);
    });

    it('garbage, revoked and non-bearer credentials → the same 401', async () => {
      for (const [label, header] of garbage()) expectUnauthorized(await call(route, real, header), label);
    });

    if (takesBody(route)) {
      it('no token → 401 whatever the body (auth runs before body handling)', async () => {
        const path = `/api/v2${fill(route, real)}`;
        const method = route.method.toLowerCase() as 'post' | 'patch' | 'put';
        expectUnauthorized(await h.http[method](path).set('Content-Type', JSON_API).send('{"data": '), 'malformed JSON');
        expectUnauthorized(await h.http[method](path).set('Content-Type', 'text/plain').send('hello'), 'text/plain');
        expectUnauthorized(await h.http[method](path).set('Content-Type', JSON_API).send('{"data": {}}'), 'invalid document');
      });
    }

    const otherOwner = OTHER_OWNER_MAY_USE[key];
    if (otherOwner) {
      it(`organization B's owner: allowed (${otherOwner.reason})`, async () => {
        const res = await call(route, real, `Bearer ${b.organizationToken}`);
        expect(res.status).toBe(200);
        otherOwner.check(res);
        expectNoLeak(res, [ORG_A, ...Object.values(real)]);
      });
    } else {
      it("organization B's owner → 404", async () => {
        expectNotFound(await call(route, real, `Bearer ${b.organizationToken}`), 'B owner');
      });
    }

    const teamAllowed = NO_PERMISSION_TEAM_MAY_USE[key];
    if (teamAllowed) {
      it(`A's team without permissions: allowed (${teamAllowed.reason})`, async () => {
        const res = await call(route, real, `Bearer ${noPermissionTeamToken}`);
        expect(res.status).toBe(200);
        teamAllowed.check(res);
        expectNoLeak(res, [
          ORG_B,
          real.workspace_id,
          real.workspace_name,
          real.id,
          real.run_id,
          real.plan_id,
          real.apply_id,
          real.task_id,
          real.workspace_task_id,
          real.task_stage_id,
          real.task_result_id,
          real.outcome_id,
          real.comment_id,
          real.configuration_version_id,
          grantedTeamId,
          allAccessTeamId,
        ]);
      });
    } else {
      it(`A's team without permissions → 404${NO_PERMISSION_TEAM_DENIED[key] ? ` (${NO_PERMISSION_TEAM_DENIED[key]})` : ''}`, async () => {
        expectNotFound(await call(route, real, `Bearer ${noPermissionTeamToken}`), 'no-permission team');
      });
    }

    if (paramsOf(route).length > 0) {
      it("nonexistent ids with A's owner token → 404", async () => {
        for (const variant of missingVariants(route)) {
          expectNotFound(await call(route, variant.values, `Bearer ${a.organizationToken}`), variant.label);
        }
      });
    }

    const adminOnly = SITE_ADMIN_ONLY[key];
    if (adminOnly) {
      it("A's owner and A's team with every organization permission → 404 (site admin only)", async () => {
        for (const [label, token] of [
          ["A's owner", a.organizationToken],
          ["A's team with every organization permission", allAccessTeamToken],
        ]) {
          expectNotFound(await call(route, real, `Bearer ${token}`), label);
          for (const variant of missingVariants(route)) {
            expectNotFound(await call(route, variant.values, `Bearer ${token}`), `${label}, ${variant.label}`);
          }
        }
      });

      it(`the site admin: allowed (${adminOnly.reason})`, async () => {
        const values = adminOnly.values ? { ...real, ...(await adminOnly.values(h)) } : real;
        const res = await call(route, values, `Bearer ${h.adminToken}`);
        expect({ status: res.status, type: res.headers['content-type'] }).toEqual({
          status: adminOnly.status,
          type: adminOnly.status === 204 ? undefined : expect.stringContaining(JSON_API),
        });
        adminOnly.check(res);
      });

      if (paramsOf(route).length > 0) {
        it("nonexistent ids with the site admin's token → 404", async () => {
          for (const variant of missingVariants(route)) {
            expectNotFound(await call(route, variant.values, `Bearer ${h.adminToken}`), variant.label);
          }
        });
      }
    }

    if (authOf(route) === 'token-or-task') {
      it("organization B's task access token → 404 (it reads its own run only)", async () => {
        expectNotFound(await call(route, real, `Bearer ${otherTaskToken}`), "B's task token");
        for (const variant of missingVariants(route)) {
          expectNotFound(await call(route, variant.values, `Bearer ${otherTaskToken}`), `B's task token, ${variant.label}`);
        }
      });
    } else {
      it('a live task access token is no API token → 401', async () => {
        expectUnauthorized(await call(route, real, `Bearer ${otherTaskToken}`), "B's task token");
      });
    }
  });

  describe.each(CALLBACK_ROUTES.map((route) => [keyOf(route), route] as const))('%s (task access token only)', (_key, route) => {
    it('no token → 401, for real and for missing ids', async () => {
      expectUnauthorized(await call(route, real), 'real ids');
      for (const variant of missingVariants(route)) expectUnauthorized(await call(route, variant.values), variant.label);
    });

    it('garbage, revoked and non-bearer credentials → the same 401', async () => {
      for (const [label, header] of garbage()) expectUnauthorized(await call(route, real, header), label);
    });

    it('every API token (owners of A and B, the site admin, a team) → the same 401', async () => {
      const tokens: [string, string][] = [
        ["A's owner", a.organizationToken],
        ["B's owner", b.organizationToken],
        ['the site admin', h.adminToken],
        ["A's team without permissions", noPermissionTeamToken],
      ];
      for (const [label, token] of tokens) {
        expectUnauthorized(await call(route, real, `Bearer ${token}`), label);
        for (const variant of missingVariants(route)) {
          expectUnauthorized(await call(route, variant.values, `Bearer ${token}`), `${label}, ${variant.label}`);
        }
      }
    });

    it("another result's live access token (organization B's) → 401", async () => {
      expectUnauthorized(await call(route, real, `Bearer ${otherTaskToken}`), "B's task token");
      for (const variant of missingVariants(route)) {
        expectUnauthorized(await call(route, variant.values, `Bearer ${otherTaskToken}`), `B's task token, ${variant.label}`);
      }
    });

    if (takesBody(route)) {
      it('no token → 401 whatever the body (auth runs before body handling)', async () => {
        const path = `/api/v2${fill(route, real)}`;
        const method = route.method.toLowerCase() as 'post' | 'patch' | 'put';
        expectUnauthorized(await h.http[method](path).set('Content-Type', JSON_API).send('{"data": '), 'malformed JSON');
        expectUnauthorized(await h.http[method](path).set('Content-Type', 'text/plain').send('hello'), 'text/plain');
        expectUnauthorized(await h.http[method](path).set('Content-Type', JSON_API).send('{"data": {}}'), 'invalid document');
      });
    }
  });

  describe('configuration versions beyond the matrix', () => {
    it('a team that may read runs (not plan them) lists, reads and downloads versions, but creates none', async () => {
      const list = await api(h, 'get', `/workspaces/${real.workspace_id}/configuration-versions`, readTeamToken);
      expect(list.status).toBe(200);
      expect(idsOf(list)).toContain(real.configuration_version_id);
      const show = await api(h, 'get', `/configuration-versions/${real.configuration_version_id}`, readTeamToken);
      expect(show.body.data.attributes).toMatchObject({ status: 'uploaded', 'upload-url': null });
      const res = await download(real.configuration_version_id, `Bearer ${readTeamToken}`);
      expect(res.status).toBe(200);
      expect(Buffer.compare(res.body as Buffer, archive)).toBe(0);
      const created = await call(
        TOKEN_ROUTES.find((route) => keyOf(route) === 'POST /workspaces/:workspace_id/configuration-versions') as RouteDef,
        real,
        `Bearer ${readTeamToken}`,
      );
      expectNotFound(created, 'read team creates a version');
    });

    it('a task access token downloads the version of its own run only; it reads nothing else of it', async () => {
      const own = await download(real.configuration_version_id, `Bearer ${versionTaskToken}`);
      expect(own.status).toBe(200);
      expect(own.headers['content-type']).toBe('application/octet-stream');
      expect(Buffer.compare(own.body as Buffer, archive)).toBe(0);
      for (const [label, token, id] of [
        ["A's run without the version", plainTaskToken, real.configuration_version_id],
        ["A's run with the version, a missing version", versionTaskToken, MISSING.configuration_version_id],
        ["A's run with the version, A's pending version", versionTaskToken, pendingVersionId],
      ] as const) {
        const res = await download(id, `Bearer ${token}`);
        expect({ label, status: res.status, text: textOf(res) }).toEqual({ label, status: 404, text: notFoundText });
      }
      // The version's other routes take API tokens only.
      for (const path of [
        `/configuration-versions/${real.configuration_version_id}`,
        `/workspaces/${real.workspace_id}/configuration-versions`,
      ]) {
        expectUnauthorized(await api(h, 'get', path, versionTaskToken), `task token on ${path}`);
      }
    });

    it("the owner's download is the archive byte for byte; a pending version has nothing to download (404)", async () => {
      const res = await download(real.configuration_version_id, `Bearer ${a.organizationToken}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-disposition']).toBe(`attachment; filename="${real.configuration_version_id}.tar.gz"`);
      expect(Buffer.compare(res.body as Buffer, archive)).toBe(0);
      const pending = await download(pendingVersionId, `Bearer ${a.organizationToken}`);
      expect({ status: pending.status, text: textOf(pending) }).toEqual({ status: 404, text: notFoundText });
    });
  });

  describe('the public upload URL (a bearer capability)', () => {
    const credentials = (): [string, string | undefined][] => [
      ['no Authorization header', undefined],
      ["A's owner", `Bearer ${a.organizationToken}`],
      ["B's owner", `Bearer ${b.organizationToken}`],
      ['the site admin', `Bearer ${h.adminToken}`],
      ['garbage bearer token', `Bearer rtk_${randomBytes(32).toString('base64url')}`],
    ];

    it('unknown, malformed, used and expired upload tokens → the same 404 as any missing resource, whatever the credentials', async () => {
      const wrong: [string, string][] = [
        ['an unknown token of the right shape', MISSING.upload_token],
        ['a fresh random token', `rtup_${randomBytes(32).toString('base64url')}`],
        ['the valid token with one character more', `${real.upload_token}x`],
        ['the valid token less its last character', real.upload_token.slice(0, -1)],
        ['the valid token in upper case', real.upload_token.toUpperCase()],
        ['a short token', 'rtup_x'],
        ['a token with a percent-encoded NUL', `${real.upload_token}%00`],
        ['a broken percent escape', '%E0%A4%A'],
        ["a live API token (A's owner's) as the upload token", a.organizationToken],
        ["an archived version's token", usedUploadToken],
        ['an expired token', expiredUploadToken],
      ];
      for (const [label, token] of wrong) {
        for (const [credential, authorization] of credentials()) {
          expectNotFound(await upload(token, archive, authorization), `${label}, ${credential}`);
        }
      }
      // The expired version was never uploaded; the archived one stays archived.
      const versions = await api(h, 'get', `/workspaces/${real.workspace_id}/configuration-versions`, a.organizationToken);
      expect(versions.body.data.map((version: { attributes: { status: string } }) => version.attributes.status).sort()).toEqual([
        'archived',
        'pending',
        'pending',
        'uploaded',
      ]);
    });

    it('a valid URL refuses what is no archive without being used up: oversize → 413, not gzip → 422', async () => {
      const tooLarge = await upload(real.upload_token, Buffer.alloc(MAX_UPLOAD_BYTES + 1, 0x1f));
      expect({ status: tooLarge.status, title: tooLarge.body.errors?.[0]?.title }).toEqual({ status: 413, title: 'payload too large' });
      for (const bytes of [Buffer.from('plain text, not an archive'), Buffer.alloc(0), Buffer.from('{"data":{}}')]) {
        const res = await upload(real.upload_token, bytes);
        expect({ status: res.status, type: res.headers['content-type'] }).toEqual({ status: 422, type: expect.stringContaining(JSON_API) });
      }
      const show = await api(h, 'get', `/configuration-versions/${pendingVersionId}`, a.organizationToken);
      expect(show.body.data.attributes.status).toBe('pending');
    });

    it('other methods on an upload URL answer alike for a valid and an unknown token', async () => {
      for (const method of ['get', 'post', 'patch', 'delete'] as const) {
        const valid = await h.http[method](uploadPath(real.upload_token));
        const unknown = await h.http[method](uploadPath(MISSING.upload_token));
        requestsSent += 2;
        expect({ method, status: valid.status, text: valid.text }).toEqual({ method, status: unknown.status, text: unknown.text });
        expect(valid.status).toBeGreaterThanOrEqual(400);
        expect(valid.status).toBeLessThan(500);
      }
    });
  });

  // Declared after every failing request above (only the one successful upload below comes later).
  describe('afterwards', () => {
    it('the failing requests changed nothing', async () => {
      expect(requestsSent).toBeGreaterThan(TOKEN_ROUTES.length * 5);
      expect(await snapshot()).toBe(stateBefore);
      // No failing request reached the point of verifying a task URL.
      expect(taskServer.requests).toBe(taskRequestsBefore);
      // And the data the matrix aimed at is all still there for its owner.
      const run = await api(h, 'get', `/runs/${real.run_id}`, a.organizationToken);
      expect(run.status).toBe(200);
      expect(run.body.data.attributes.status).toBe('pending');
      const teams = await api(h, 'get', `/organizations/${ORG_A}/teams`, a.organizationToken);
      const ownersTeam = (teams.body.data as { id: string; attributes: { name: string } }[]).find(
        (team) => team.attributes.name === 'owners',
      );
      expect(idsOf(teams).sort()).toEqual([ownersTeam?.id, a.teamId, grantedTeamId, allAccessTeamId].sort());
      const access = await api(h, 'get', `/team-workspaces/${real.id}`, a.organizationToken);
      expect(access.body.data.attributes.access).toBe('read');
      const task = await api(h, 'get', `/tasks/${real.task_id}`, a.organizationToken);
      expect(task.body.data.attributes).toMatchObject({ name: 'isolation-task', description: null, enabled: true });
      expect(task.body.data.relationships['workspace-tasks'].data).toEqual([{ id: real.workspace_task_id, type: 'workspace-tasks' }]);
      const association = await api(h, 'get', `/workspaces/${real.workspace_id}/tasks/${real.workspace_task_id}`, a.organizationToken);
      expect(association.body.data.attributes).toMatchObject({ 'enforcement-level': 'advisory', stages: ['post_plan'] });
      const stage = await api(h, 'get', `/task-stages/${real.task_stage_id}`, a.organizationToken);
      expect(stage.body.data.attributes.status).toBe('pending');
      const outcomes = await api(h, 'get', `/task-results/${real.task_result_id}/outcomes`, a.organizationToken);
      expect(idsOf(outcomes)).toEqual([real.outcome_id]);
      const result = await api(h, 'get', `/task-results/${real.task_result_id}`, a.organizationToken);
      expect(result.body.data.attributes).toMatchObject({ status: 'pending', message: null, 'task-result-outcomes-count': 0 });
      const attempts = await api(h, 'get', `/task-results/${real.task_result_id}/delivery-attempts`, a.organizationToken);
      expect(attempts.body.data.map((attempt: { attributes: Record<string, unknown> }) => attempt.attributes)).toEqual([
        expect.objectContaining({ attempt: 1, 'http-status': 200 }),
      ]);
      const version = await api(h, 'get', `/configuration-versions/${real.configuration_version_id}`, a.organizationToken);
      expect(version.body.data.attributes.status).toBe('uploaded');
      const pending = await api(h, 'get', `/configuration-versions/${pendingVersionId}`, a.organizationToken);
      expect(pending.body.data.attributes.status).toBe('pending');
      const organization = await api(h, 'get', `/organizations/${ORG_A}/entitlement-set`, a.organizationToken);
      expect(organization.body.data.attributes['global-run-tasks']).toBe(true);
    });
  });

  // After the snapshot comparison: the one request here that succeeds changes the pending version.
  describe('the upload URL, used last', () => {
    it('a token-less PUT of a real archive works, and again (replacing it) while no run uses the version', async () => {
      const first = configurationArchive('resource "null_resource" "uploaded-first" {}\n');
      const next = configurationArchive('resource "null_resource" "uploaded-last" {}\n');
      const res = await upload(real.upload_token, first);
      expect({ status: res.status, text: res.text }).toEqual({ status: 200, text: '' });
      // Credentials change nothing: the URL's secret is what authorizes it.
      const again = await upload(real.upload_token, next, `Bearer ${b.organizationToken}`);
      expect({ status: again.status, text: again.text }).toEqual({ status: 200, text: '' });
      const show = await api(h, 'get', `/configuration-versions/${pendingVersionId}`, a.organizationToken);
      expect(show.body.data.attributes.status).toBe('uploaded');
      expect(show.body.data.attributes['status-timestamps']).toHaveProperty('uploaded-at');
      const downloaded = await download(pendingVersionId, `Bearer ${a.organizationToken}`);
      expect(Buffer.compare(downloaded.body as Buffer, next)).toBe(0);
      // Only that version changed (auto-queue-runs is off: no run either).
      const changed = (await snapshot()).split('\n');
      const before = stateBefore.split('\n');
      expect(changed.filter((line) => !line.startsWith('configuration_versions:'))).toEqual(
        before.filter((line) => !line.startsWith('configuration_versions:')),
      );
      expect(changed.find((line) => line.startsWith('configuration_versions:'))).not.toBe(
        before.find((line) => line.startsWith('configuration_versions:')),
      );
    });
  });
});
