import { type ParamName, type Values } from './params.ts';

/** Request bodies of the isolation matrix: one entry per route that takes a body. */

/**
 * A valid-looking JSON:API body for every route that takes one, so a 404 comes from authorization
 * and never from validation. `params` names the ids the body refers to: the nonexistent-id variants
 * replace them like path parameters.
 */
export interface BodySpec {
  params: ParamName[];
  body: (values: Values) => unknown;
}
export const tokenBody: BodySpec = {
  params: [],
  body: () => ({ data: { type: 'authentication-tokens', attributes: { description: 'isolation' } } }),
};
export const runActionBody: BodySpec = { params: [], body: () => ({ comment: 'isolation' }) };
/** Token routes that read their body raw, but a JSON one (a plan document): the matrix's JSON bodies fit them. */
export const RAW_JSON_ROUTES = ['PUT /plans/:plan_id/json-output', 'PUT /runs/:run_id/plan/json-output'];
export const planReportBody: BodySpec = { params: [], body: () => ({ format_version: '1.2', resource_changes: [] }) };
export const errorReportBody: BodySpec = { params: [], body: () => ({ message: 'isolation' }) };
export const finishReportBody: BodySpec = { params: [], body: () => ({}) };
const notificationBody: BodySpec = {
  params: [],
  body: () => ({
    data: {
      type: 'notification-configurations',
      attributes: { name: 'isolation', 'destination-type': 'generic', url: 'http://example.com/' },
    },
  }),
};
const consumersBody: BodySpec = { params: [], body: (values) => ({ data: [{ type: 'workspaces', id: values.workspace_id }] }) };
/** The loopback task server the fixtures' run task verifies against (set in beforeAll). */
export const taskServer = { url: '', requests: 0 };
const membersBody = (type: string, id: (values: Values) => string): BodySpec => ({
  params: [],
  body: (values) => ({ data: [{ type, id: id(values) }] }),
});
const usersBody = membersBody('users', () => 'isolation-member');
const membershipsBody = membersBody('organization-memberships', (values) => values.organization_membership_id);
export const BODIES: Record<string, BodySpec> = {
  'PATCH /account/update': { params: [], body: () => ({ data: { type: 'users', attributes: { username: 'isolation-renamed' } } }) },
  'POST /organizations/:organization_name/organization-memberships': {
    params: [],
    body: () => ({ data: { type: 'organization-memberships', attributes: { email: 'isolation-invitee@example.test' } } }),
  },
  // Accepting takes no body; only the invited person may, so everyone in the matrix gets a 404.
  'POST /organization-memberships/:organization_membership_id/actions/accept': { params: [], body: () => ({}) },
  'POST /teams/:team_id/relationships/users': usersBody,
  'DELETE /teams/:team_id/relationships/users': usersBody,
  'POST /teams/:team_id/relationships/organization-memberships': membershipsBody,
  'DELETE /teams/:team_id/relationships/organization-memberships': membershipsBody,
  'POST /users/:user_id/authentication-tokens': tokenBody,
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
  'POST /workspaces/:workspace_id/ci-trust-rules': {
    params: [],
    body: () => ({
      data: {
        type: 'ci-trust-rules',
        attributes: { issuer: 'https://token.actions.githubusercontent.com', claims: { repository: 'isolation/new' } },
      },
    }),
  },
  'PATCH /ci-trust-rules/:rule_id': {
    params: [],
    body: () => ({ data: { type: 'ci-trust-rules', attributes: { claims: { repository: 'isolation/changed' } } } }),
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
  'POST /workspaces/:workspace_id/notification-configurations': notificationBody,
  'POST /teams/:team_id/notification-configurations': notificationBody,
  'PATCH /notification-configurations/:configuration_id': notificationBody,
  'POST /notification-configurations/:configuration_id/actions/verify': finishReportBody,
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
