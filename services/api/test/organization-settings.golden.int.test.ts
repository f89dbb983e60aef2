import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, NOT_FOUND, uniqueName } from '../../../test/support/assertions.ts';
import { api, createOrganization, createOrganizationToken } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests of an organization's settings as go-tfe sends and reads them: every attribute its create
 * and update options carry is stored and returned (HCP's default when left out) or refused at its
 * pointer; the entitlement set and the default project. Documents are compared whole.
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
const organizationDocument = (attributes: Record<string, unknown>) => ({ data: { type: 'organizations', attributes } });

const DEFAULT_SETTINGS = {
  'default-execution-mode': 'remote',
  'allow-force-delete-workspaces': false,
  'assessments-enforced': false,
  'collaborator-auth-policy': 'password',
  'cost-estimation-enabled': false,
  'send-passing-statuses-for-untriggered-speculative-plans': false,
  'aggregated-commit-status-enabled': false,
  'speculative-plan-management-enabled': true,
  'owners-team-saml-role-id': null,
  'session-remember': 20160,
  'session-timeout': 20160,
  'stacks-enabled': false,
  'registry-monorepo-support-enabled': false,
  'sso-team-mapping': null,
  'saml-enabled': false,
  'two-factor-conformant': true,
  'trial-expires-at': null,
  'remaining-testable-count': 0,
  'is-unified': false,
};

/** A value for each writable setting that differs from HCP's default. */
const CHANGED: [string, unknown][] = [
  ['default-execution-mode', 'local'],
  ['allow-force-delete-workspaces', true],
  ['assessments-enforced', true],
  ['collaborator-auth-policy', 'two_factor_mandatory'],
  ['cost-estimation-enabled', true],
  ['send-passing-statuses-for-untriggered-speculative-plans', true],
  ['aggregated-commit-status-enabled', true],
  ['speculative-plan-management-enabled', false],
  ['owners-team-saml-role-id', 'saml-role-7'],
  ['session-remember', 3600],
  ['session-timeout', 60],
  ['stacks-enabled', true],
  ['registry-monorepo-support-enabled', true],
  ['sso-team-mapping', { 'idp-platform': 'owners' }],
];

describe('organization settings', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it("returns every setting with HCP's default, the default project and no agent pool", async () => {
    const name = uniqueName('defaults');
    const created = await api(h, 'post', '/organizations', h.adminToken, organizationDocument({ name, email: 'o@example.test' }));
    expect(created.status).toBe(201);
    const externalId = created.body.data.attributes['external-id'] as string;
    const projectId = `prj-${externalId.slice('org-'.length)}`;
    expect(created.body.data).toEqual({
      id: name,
      type: 'organizations',
      attributes: {
        name,
        email: 'o@example.test',
        'external-id': expect.stringMatching(/^org-[A-Za-z0-9]{16}$/),
        edition: 'standard',
        'task-overrides-enabled': false,
        ...DEFAULT_SETTINGS,
        'created-at': ISO,
        'updated-at': ISO,
        permissions: expect.objectContaining({ 'can-update': true }),
      },
      relationships: {
        'entitlement-set': { data: { id: externalId, type: 'entitlement-sets' } },
        'default-project': { data: { id: projectId, type: 'projects' } },
        'default-agent-pool': { data: null },
      },
      links: { self: `/api/v2/organizations/${name}` },
    });

    const shown = await api(h, 'get', `/organizations/${name}?include=default_project`, h.adminToken);
    expect(shown.status).toBe(200);
    expect(shown.body.data).toEqual(created.body.data);
    expect(shown.body.included).toEqual([
      {
        id: projectId,
        type: 'projects',
        attributes: { name: 'Default Project', description: null, 'created-at': ISO },
        relationships: { organization: { data: { id: name, type: 'organizations' } } },
        links: { self: `/api/v2/projects/${projectId}` },
      },
    ]);
  });

  it('refuses an include it does not serve (400), as elsewhere', async () => {
    const name = await createOrganization(h, uniqueName('include'));
    const res = await api(h, 'get', `/organizations/${name}?include=default_agent_pool`, h.adminToken);
    expect(res.status).toBe(400);
  });

  it.each(CHANGED)('stores %s on create and on update, and returns it', async (attribute, value) => {
    const name = uniqueName('set');
    const created = await api(
      h,
      'post',
      '/organizations',
      h.adminToken,
      organizationDocument({ name, email: 'o@example.test', [attribute]: value }),
    );
    expect(created.status).toBe(201);
    expect(created.body.data.attributes[attribute]).toEqual(value);
    const token = await createOrganizationToken(h, name);
    const reset = (DEFAULT_SETTINGS as Record<string, unknown>)[attribute];
    const updated = await api(h, 'patch', `/organizations/${name}`, token, organizationDocument({ [attribute]: reset }));
    expect(updated.status).toBe(200);
    expect(updated.body.data.attributes[attribute]).toEqual(reset);
    const again = await api(h, 'patch', `/organizations/${name}`, token, organizationDocument({ [attribute]: value }));
    expect(again.body.data.attributes[attribute]).toEqual(value);
    const shown = await api(h, 'get', `/organizations/${name}`, token);
    expect(shown.body.data.attributes).toEqual({ ...again.body.data.attributes, 'updated-at': ISO });
  });

  it.each<[string, unknown]>([
    ['default-execution-mode', 'agent'],
    ['default-execution-mode', 'remote-ish'],
    ['collaborator-auth-policy', 'sso'],
    ['session-timeout', 0],
    ['session-remember', 1.5],
    ['session-remember', 525601],
    ['cost-estimation-enabled', 'maybe'],
    ['owners-team-saml-role-id', 7],
    ['name', 'not a name'],
  ])('refuses %s = %j with a 422 at its pointer, and changes nothing', async (attribute, value) => {
    const name = await createOrganization(h, uniqueName('refuse'));
    const before = await api(h, 'get', `/organizations/${name}`, h.adminToken);
    const res = await api(h, 'patch', `/organizations/${name}`, h.adminToken, organizationDocument({ [attribute]: value }));
    expectError(res, 422, `/data/attributes/${attribute}`);
    const created = await api(
      h,
      'post',
      '/organizations',
      h.adminToken,
      organizationDocument({ name: uniqueName('refuse'), email: 'o@example.test', [attribute]: value }),
    );
    expectError(created, 422, `/data/attributes/${attribute}`);
    expect((await api(h, 'get', `/organizations/${name}`, h.adminToken)).body).toEqual(before.body);
  });

  it('renames an organization: the old name is gone, its tokens and teams follow', async () => {
    const name = await createOrganization(h, uniqueName('old'));
    const token = await createOrganizationToken(h, name);
    const renamed = uniqueName('new');
    const res = await api(h, 'patch', `/organizations/${name}`, token, organizationDocument({ name: renamed }));
    expect(res.status).toBe(200);
    expect(res.body.data.id).toBe(renamed);
    expect((await api(h, 'get', `/organizations/${name}`, token)).body).toEqual(NOT_FOUND);
    const teams = await api(h, 'get', `/organizations/${renamed}/teams`, token);
    expect(teams.body.data.map((team: { attributes: { name: string } }) => team.attributes.name)).toEqual(['owners']);
  });

  it('refuses a rename to a name another organization has (422), keeping both', async () => {
    const first = await createOrganization(h, uniqueName('first'));
    const second = await createOrganization(h, uniqueName('second'));
    const res = await api(h, 'patch', `/organizations/${second}`, h.adminToken, organizationDocument({ name: first }));
    expectError(res, 422, '/data/attributes/name');
    expect((await api(h, 'get', `/organizations/${second}`, h.adminToken)).status).toBe(200);
  });

  it('finds organizations by name or email with q, in any case, matching % and _ as text', async () => {
    const tag = uniqueName('Findme').toLowerCase();
    const byName = await createOrganization(h, `${tag}-a`);
    const byEmail = uniqueName('other');
    await api(h, 'post', '/organizations', h.adminToken, organizationDocument({ name: byEmail, email: `${tag}@example.test` }));
    const found = await api(h, 'get', `/organizations?q=${tag.toUpperCase()}`, h.adminToken);
    expect(found.body.data.map((o: { id: string }) => o.id).sort()).toEqual([byName, byEmail].sort());
    expect(found.body.meta.pagination['total-count']).toBe(2);
    const wildcard = await api(h, 'get', '/organizations?q=%25', h.adminToken);
    expect(wildcard.body.data).toEqual([]);
  });

  it("lists HCP's entitlement keys, false for features this service does not have", async () => {
    const name = await createOrganization(h, uniqueName('entitled'));
    const res = await api(h, 'get', `/organizations/${name}/entitlement-set`, h.adminToken);
    expect(res.status).toBe(200);
    // There are no state versions: the set must not claim state storage.
    const states = await api(h, 'get', `/state-versions?filter%5Borganization%5D%5Bname%5D=${name}`, h.adminToken);
    expect(states.status).toBe(404);
    expect(res.body.data.attributes).toEqual({
      'run-tasks': true,
      'run-task-limit': null,
      'run-task-workspace-limit': null,
      'run-task-mandatory-enforcement-limit': null,
      'global-run-tasks': true,
      'private-run-tasks': false,
      teams: true,
      operations: true,
      'state-storage': false,
      agents: false,
      'audit-logging': true,
      'configuration-designer': false,
      'cost-estimation': false,
      'module-tests-generation': false,
      'private-module-registry': false,
      'private-policy-agents': false,
      'private-vcs': false,
      'self-serve-billing': false,
      sentinel: false,
      sso: false,
      'usage-reporting': false,
      'user-limit': null,
      'vcs-integrations': false,
      'waypoint-actions': false,
      'waypoint-templates-and-addons': false,
    });
  });
});
