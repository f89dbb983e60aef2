import { EDITIONS, TEAM_RUNS_ACCESS, TEAM_WORKSPACE_ACCESS } from '@runtasks/shared/domain';
import { createTeam } from '../../../../test/support/fixtures.ts';
import { uniqueName } from '../../../../test/support/assertions.ts';
import {
  bool,
  datetime,
  FUTURE,
  object,
  oneOf,
  relationshipFields,
  relationshipRequired,
  resourceFields,
  str,
  type WriteSpec,
} from './model.ts';
import { type Fixtures } from './fixtures.ts';

/** WriteSpecs: Organizations, their tokens and teams, and teams' workspace access. */
export async function addOrganizationSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, main, patched, wsMain, wsOther, teamPatched, teamToken, teamAccess, accessPatched, h } = f;
  // -- the specs ------------------------------------------------------------------------------

  const organizationAttributes = {
    email: str('email', 255),
    edition: oneOf(EDITIONS),
    'task-overrides-enabled': bool,
    // HCP's settings (the whole numbers are tested in the organization settings golden test).
    'default-execution-mode': oneOf(['remote', 'local']),
    'collaborator-auth-policy': oneOf(['password', 'two_factor_mandatory']),
    'allow-force-delete-workspaces': bool,
    'cost-estimation-enabled': bool,
    'speculative-plan-management-enabled': bool,
    'owners-team-saml-role-id': str('text', 255, { nullable: true }),
  };
  SPECS['POST /organizations'] = {
    attributes: '/data/attributes',
    fields: resourceFields('organizations', { name: str('name', 40), ...organizationAttributes }),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name', '/data/attributes/email'],
    success: 201,
    base: async () => ({
      path: '/organizations',
      body: {
        data: {
          type: 'organizations',
          attributes: { name: 'prop-base-org', email: 'base@example.test', edition: 'standard', 'task-overrides-enabled': 'true' },
        },
      },
    }),
    fresh: async () => ({
      path: '/organizations',
      body: { data: { type: 'organizations', attributes: { name: uniqueName('prop-org'), email: 'fresh@example.test' } } },
    }),
    failures: [
      async () => ({
        path: '/organizations',
        body: { data: { type: 'organizations', attributes: { name: main, email: 'dup@example.test' } } },
      }),
    ],
  };

  const patchOrganization = (attributes: Record<string, unknown>) => ({
    path: `/organizations/${patched}`,
    body: { data: { type: 'organizations', attributes } },
  });
  SPECS['PATCH /organizations/:organization_name'] = {
    attributes: '/data/attributes',
    fields: resourceFields('organizations', { ...organizationAttributes, name: str('name', 40) }),
    required: ['/data', '/data/type'],
    success: 200,
    base: async () =>
      patchOrganization({ email: 'patched@example.test', edition: 'standard', 'task-overrides-enabled': false, name: patched }),
    fresh: async () => patchOrganization({ email: 'patched@example.test', 'task-overrides-enabled': true }),
    failures: [
      // A rename to a taken name is refused with everything else of the request: the email stays.
      async () => patchOrganization({ email: 'renamed@example.test', name: main }),
      async () => ({ path: '/organizations/no-such-organization', body: patchOrganization({}).body }),
    ],
  };

  const tokenSpec = (path: string, missingPath: string): WriteSpec => {
    const document = (attributes: Record<string, unknown>) => ({ path, body: { data: { type: 'authentication-tokens', attributes } } });
    return {
      attributes: '/data/attributes',
      fields: {
        ...resourceFields('authentication-tokens', {
          description: str('text', 255, { nullable: true }),
          'expired-at': datetime(true),
        }),
        // go-tfe's "" and HCP's documented singular are accepted as well.
        '/data/type': oneOf(['', 'authentication-token', 'authentication-tokens']),
      },
      // Without data the body is `{}`, which is valid; so are missing attributes.
      required: ['/data/type'],
      success: 201,
      base: async () => document({ description: 'base', 'expired-at': FUTURE }),
      fresh: async () => document({ description: 'fresh', 'expired-at': FUTURE }),
      failures: [async () => ({ path: missingPath, body: document({ description: 'missing' }).body })],
    };
  };
  SPECS['POST /organizations/:organization_name/authentication-token'] = tokenSpec(
    `/organizations/${main}/authentication-token`,
    '/organizations/no-such-organization/authentication-token',
  );
  SPECS['POST /teams/:team_id/authentication-token'] = tokenSpec(
    `/teams/${teamToken}/authentication-token`,
    '/teams/team-doesnotexist000/authentication-token',
  );

  const teamAttributes = {
    name: str('text', 255, { nonEmpty: true }),
    'organization-access': object(),
    'organization-access/manage-run-tasks': bool,
    'organization-access/manage-workspaces': bool,
    'organization-access/manage-policy-overrides': bool,
  };
  const teamDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'teams', attributes } });
  const allAccess = { 'manage-run-tasks': false, 'manage-workspaces': 'false', 'manage-policy-overrides': false };
  SPECS['POST /organizations/:organization_name/teams'] = {
    attributes: '/data/attributes',
    fields: resourceFields('teams', teamAttributes),
    required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name'],
    success: 201,
    base: async () => ({
      path: `/organizations/${main}/teams`,
      body: teamDocument({ name: 'team-base', 'organization-access': allAccess }),
    }),
    fresh: async () => ({
      path: `/organizations/${main}/teams`,
      body: teamDocument({ name: uniqueName('team 🚀 fresh'), 'organization-access': { 'manage-workspaces': true } }),
    }),
    failures: [
      // Taken names are those of resources no PATCH here targets: a hostile body may rename the others.
      async () => ({ path: `/organizations/${main}/teams`, body: teamDocument({ name: 'team-token' }) }),
      async () => ({ path: '/organizations/no-such-organization/teams', body: teamDocument({ name: uniqueName('team') }) }),
    ],
  };
  SPECS['PATCH /teams/:team_id'] = {
    attributes: '/data/attributes',
    fields: resourceFields('teams', teamAttributes),
    required: ['/data', '/data/type'],
    success: 200,
    base: async () => ({ path: `/teams/${teamPatched}`, body: teamDocument({ name: 'team-patched', 'organization-access': allAccess }) }),
    fresh: async () => ({ path: `/teams/${teamPatched}`, body: teamDocument({ 'organization-access': { 'manage-run-tasks': 'true' } }) }),
    failures: [
      // Taken name: the unique violation rolls the whole change back, access included.
      async () => ({
        path: `/teams/${teamPatched}`,
        body: teamDocument({ name: 'team-token', 'organization-access': { 'manage-policy-overrides': true } }),
      }),
      async () => ({ path: '/teams/team-doesnotexist000', body: teamDocument({}) }),
    ],
  };

  const accessAttributes = { access: oneOf(TEAM_WORKSPACE_ACCESS), runs: oneOf(TEAM_RUNS_ACCESS), 'run-tasks': bool };
  const accessDocument = (teamId: string, workspaceId: string, attributes: Record<string, unknown> = {}) => ({
    data: {
      type: 'team-workspaces',
      attributes,
      relationships: {
        team: { data: { type: 'teams', id: teamId } },
        workspace: { data: { type: 'workspaces', id: workspaceId } },
      },
    },
  });
  SPECS['POST /team-workspaces'] = {
    attributes: '/data/attributes',
    fields: resourceFields('team-workspaces', accessAttributes, {
      '': object(),
      ...relationshipFields('team', 'teams'),
      ...relationshipFields('workspace', 'workspaces'),
    }),
    required: ['/data', '/data/type', ...relationshipRequired('team'), ...relationshipRequired('workspace').slice(1)],
    success: 201,
    base: async () => ({
      path: '/team-workspaces',
      body: accessDocument(teamAccess, wsMain, { access: 'custom', runs: 'plan', 'run-tasks': 'false' }),
    }),
    fresh: async () => ({
      path: '/team-workspaces',
      body: accessDocument(await createTeam(h, main, admin, uniqueName('team-fresh')), wsMain, { access: 'write' }),
    }),
    failures: [
      async () => ({ path: '/team-workspaces', body: accessDocument(teamAccess, wsMain, { access: 'admin' }) }),
      async () => ({ path: '/team-workspaces', body: accessDocument('team-doesnotexist000', wsMain) }),
      async () => ({ path: '/team-workspaces', body: accessDocument(teamPatched, wsOther) }),
    ],
  };
  const accessPatch = (attributes: Record<string, unknown>) => ({ data: { type: 'team-workspaces', attributes } });
  SPECS['PATCH /team-workspaces/:id'] = {
    attributes: '/data/attributes',
    fields: resourceFields('team-workspaces', accessAttributes),
    required: ['/data', '/data/type'],
    success: 200,
    base: async () => ({
      path: `/team-workspaces/${accessPatched}`,
      body: accessPatch({ access: 'custom', runs: 'apply', 'run-tasks': true }),
    }),
    fresh: async () => ({ path: `/team-workspaces/${accessPatched}`, body: accessPatch({ access: 'read' }) }),
    failures: [async () => ({ path: '/team-workspaces/tws-doesnotexist0000', body: accessPatch({ access: 'admin' }) })],
  };
}
