import { expect } from '@jest/globals';
import { type RouteDef } from '../../src/routes/define.ts';
import { type Harness } from '../../../../test/support/harness.ts';
import { createOrganization } from '../../../../test/support/fixtures.ts';
import { idsOf, type Response } from '../../../../test/support/assertions.ts';
import { ORG_A, ORG_B, type Values } from './params.ts';

/** The routes the matrix treats apart: public ones, task-token ones, and what each kind of token may still do. */

/** Routes anyone may call without a token; anything else must be 'token', 'token-or-task' or 'callback'. */
export const UPLOAD_ROUTE = 'PUT /uploads/configuration-versions/:upload_token';
export const CI_EXCHANGE_ROUTE = 'POST /ci-token-exchanges';
export const PUBLIC_ROUTES: Record<string, string> = {
  'GET /ping': 'go-tfe pings before it sends a token; the answer carries only version headers',
  [UPLOAD_ROUTE]:
    'go-tfe PUTs the archive without a token: the upload URL itself is the credential, a single-use, expiring ' +
    'bearer capability (see "the public upload URL" below: unknown, used and expired URLs are the one 404)',
  [CI_EXCHANGE_ROUTE]:
    "a pipeline has no token yet: its CI identity token, verified against its issuer's keys and matched against a " +
    "workspace's trust rules, is the credential (services/api/test/ci-token-exchange.int.test.ts)",
};
/** Public routes that take a body: each has its own tests (the matrix sends no body to public routes). */
export const PUBLIC_ROUTES_WITH_OWN_TESTS = [UPLOAD_ROUTE, CI_EXCHANGE_ROUTE];

/** Writes that change nothing with the real values, proving a parameter that no GET route takes. */
export const PROVEN_BY_IDEMPOTENT_WRITE = ['POST /tags/:tag_id/relationships/workspaces'];

/**
 * Routes ('callback') a task server calls with a task result's own access token: no API token of any
 * kind (site admin included) is a credential there, so every one of them gets the same 401.
 */
export const TASK_TOKEN_ONLY_ROUTES: Record<string, string> = {
  'PATCH /task-results/:task_result_id/callback': "a task server reports its verdict with that result's access token only",
};

export interface Allowed {
  reason: string;
  /** Checks the successful answer, including that nothing beyond what the caller may see leaks. */
  check: (res: Response) => void;
}

/**
 * Routes the team without any permissions may legitimately use. Every other token route must answer
 * it exactly like a missing resource.
 */
/** Any token reads who it acts as, and its own memberships (none for a token that is not a person's). */
const SERVICE_USER: Allowed = {
  reason: 'any token reads the user it acts as: a service user for a team or organization token',
  check: (res) => expect(res.body.data.attributes).toMatchObject({ 'is-service-account': true, email: null }),
};
const NO_OWN_MEMBERSHIPS: Allowed = {
  reason: "a root collection of the caller's own memberships: a team or organization token is nobody's, so it has none",
  check: (res) => expect(res.body.meta.pagination['total-count']).toBe(0),
};
export const NO_PERMISSION_TEAM_MAY_USE: Record<string, Allowed> = {
  'GET /account/details': SERVICE_USER,
  'GET /organization-memberships': NO_OWN_MEMBERSHIPS,
  'GET /users/:user_id': {
    reason: "every member sees the public fields of its organization's members (never their email address)",
    check: (res) => {
      expect(res.body.data.type).toBe('users');
      expect(res.body.data.attributes.email).toBeUndefined();
    },
  },
  'GET /users/:user_id/authentication-tokens': {
    reason: "another user's tokens are an empty list, as in HCP",
    check: (res) => expect(res.body.data).toEqual([]),
  },
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
  'GET /organizations/:organization_name/runs': {
    reason: "every member lists its organization's runs, but sees only those of workspaces it reads: none here",
    check: (res) => {
      expect(res.body.data).toEqual([]);
      expect(res.body.meta.pagination['next-page']).toBeNull();
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
export const NEEDS_MANAGE_RUN_TASKS = 'needs the organization permission "manage run tasks"';
export const NEEDS_WORKSPACE_RUN_TASKS = 'needs workspace access with "run-tasks" on the workspace';
export const NEEDS_RUN_READ = "needs read access to the run's workspace";
export const NEEDS_WORKSPACE_RUNS_READ = 'needs workspace access that may read runs';
export const NEEDS_WORKSPACE_RUNS_PLAN = 'needs workspace access that may plan runs';
export const SITE_ADMIN = 'site admin only';
export const NO_PERMISSION_TEAM_DENIED: Record<string, string> = {
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
export const isRunTaskRoute = (route: RouteDef): boolean =>
  /\/(tasks|task-stages|task-results|task-result-outcomes)(\/|$)/.test(route.path);

export interface AdminAllowed extends Allowed {
  status: number;
  /** Parameters of the site admin's own call, instead of the real ones (a delete aims at an organization of its own). */
  values?: (h: Harness) => Promise<Partial<Values>>;
}

export const DISPOSABLE_ORG = 'isolation-disposable';

/**
 * Site-admin routes: every organization token (A's owner included) and every team token (even one
 * with every organization permission) gets the same 404 as a missing resource; the site admin succeeds.
 * Every /admin route must be listed here.
 */
export const SITE_ADMIN_ONLY: Record<string, AdminAllowed> = {
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
export const isAdminRoute = (route: RouteDef): boolean => route.path.startsWith('/admin/');
export const isConfigurationVersionRoute = (route: RouteDef): boolean => route.path.includes('configuration-versions');

/** Root collections (no id in the path) answer another organization's owner with its own data only. */
export const OTHER_OWNER_MAY_USE: Record<string, Allowed> = {
  'GET /account/details': SERVICE_USER,
  'GET /organization-memberships': NO_OWN_MEMBERSHIPS,
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
