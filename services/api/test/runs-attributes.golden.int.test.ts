import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Run } from '@runtasks/shared/db';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { api, createRun, createTeamToken, grantWorkspace, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden documents of HCP's run attributes (as go-tfe's Run decodes them), the actors behind runs and
 * tokens (`created-by`, `confirmed-by`), the run includes and list filters, and the refusals of option
 * combinations HCP refuses (422 naming the attribute, nothing created).
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

/** What a run created with nothing but its workspace shows: HCP's defaults. */
const DEFAULT_ATTRIBUTES = {
  status: 'pending',
  'status-timestamps': { 'plan-queueable-at': ISO },
  message: 'Queued manually via the API',
  source: 'tfe-api',
  'is-destroy': false,
  'plan-only': false,
  'auto-apply': false,
  'has-changes': false,
  'has-task-warnings': false,
  'created-at': ISO,
  refresh: true,
  'refresh-only': false,
  'allow-empty-apply': false,
  'save-plan': false,
  'allow-config-generation': false,
  'debugging-mode': false,
  'terraform-version': expect.stringMatching(/^\d+\.\d+\.\d+/),
  'target-addrs': null,
  'replace-addrs': null,
  variables: [],
  'position-in-queue': 0,
  // Not HCP's: what a run waiting in its workspace's queue waits for (docs/pipelines.md, "Waiting in the queue").
  'waiting-for': null,
  'force-cancel-available-at': null,
  actions: { 'is-cancelable': true, 'is-confirmable': false, 'is-discardable': true, 'is-force-cancelable': false },
  permissions: { 'can-apply': true, 'can-cancel': true, 'can-discard': true, 'can-force-cancel': true, 'can-force-execute': true },
};

const workspaceOf = (id: string) => ({ workspace: { data: { type: 'workspaces', id } } });

describe('run attributes, actors and includes (golden)', () => {
  let h: Harness;
  let acme: Fixture;
  let organizationId: string;
  const countRuns = async (workspaceId: string): Promise<number> => h.orm.em.fork().count(Run, { workspace: workspaceId });
  const create = (token: string, attributes: Record<string, unknown>, workspaceId = acme.workspaceId) =>
    api(h, 'post', '/runs', token, { data: { type: 'runs', attributes, relationships: workspaceOf(workspaceId) } });

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('runattr'));
    const [row] = await h.orm.em.fork().execute<{ id: string }[]>('select id from organizations where name = ?', [acme.organization]);
    organizationId = row?.id ?? '';
  });

  afterAll(async () => {
    await h?.close();
  });

  it("shows HCP's defaults, the creator and plan-queueable-at (= created-at) on a new run", async () => {
    const res = await create(acme.organizationToken, {});
    expect(res.status).toBe(201);
    expect(res.body.data.attributes).toEqual(DEFAULT_ATTRIBUTES);
    expect(res.body.data.attributes['status-timestamps']['plan-queueable-at']).toBe(res.body.data.attributes['created-at']);
    expect(res.body.data.relationships['created-by']).toEqual({ data: { type: 'users', id: `user-api-${organizationId}` } });
    expect(res.body.data.relationships['confirmed-by']).toEqual({ data: null });
    const shown = await api(h, 'get', `/runs/${res.body.data.id}`, acme.organizationToken);
    expect(shown.body.data.attributes).toEqual(res.body.data.attributes);
  });

  it('stores and returns every creation option', async () => {
    const attributes = {
      message: 'with options',
      refresh: false,
      'allow-config-generation': true,
      'debugging-mode': 'true',
      'target-addrs': ['null_resource.a', 'module.b'],
      'replace-addrs': ['null_resource.a'],
      variables: [
        { key: 'region', value: '"eu"' },
        { key: 'count', value: '2' },
      ],
    };
    const res = await create(acme.organizationToken, attributes);
    expect(res.status).toBe(201);
    const expected = { ...attributes, 'debugging-mode': true };
    expect(res.body.data.attributes).toMatchObject(expected);
    const shown = await api(h, 'get', `/runs/${res.body.data.id}`, acme.organizationToken);
    expect(shown.body.data.attributes).toMatchObject(expected);
    const planOnly = await create(acme.organizationToken, { 'plan-only': true, 'terraform-version': '1.0.0' });
    expect(planOnly.body.data.attributes).toMatchObject({ 'plan-only': true, 'terraform-version': '1.0.0' });
    const saved = await create(acme.organizationToken, { 'save-plan': true, 'allow-empty-apply': true, 'refresh-only': true });
    expect(saved.body.data.attributes).toMatchObject({ 'save-plan': true, 'allow-empty-apply': true, 'refresh-only': true, refresh: true });
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['a Terraform version without plan-only', { 'terraform-version': '1.0.0' }, '/data/attributes/terraform-version'],
    ['refresh-only without refresh', { 'refresh-only': true, refresh: false }, '/data/attributes/refresh-only'],
    ['a refresh-only destroy', { 'refresh-only': true, 'is-destroy': true }, '/data/attributes/refresh-only'],
    ['replacing in a destroy', { 'is-destroy': true, 'replace-addrs': ['a.b'] }, '/data/attributes/replace-addrs'],
    ['a plan-only saved plan', { 'plan-only': true, 'save-plan': true }, '/data/attributes/save-plan'],
    ['a plan-only empty apply', { 'plan-only': true, 'allow-empty-apply': true }, '/data/attributes/allow-empty-apply'],
    ['a malformed Terraform version', { 'plan-only': true, 'terraform-version': 'latest' }, '/data/attributes/terraform-version'],
    ['an empty address', { 'target-addrs': [''] }, '/data/attributes/target-addrs/0'],
    ['a repeated address', { 'replace-addrs': ['a.b', 'a.b'] }, '/data/attributes/replace-addrs'],
    [
      'a repeated variable',
      {
        variables: [
          { key: 'a', value: '1' },
          { key: 'a', value: '2' },
        ],
      },
      '/data/attributes/variables',
    ],
    ['a variable without a value', { variables: [{ key: 'a' }] }, '/data/attributes/variables/0/value'],
    ['a variable with a bad name', { variables: [{ key: '1a', value: '1' }] }, '/data/attributes/variables/0/key'],
  ])('refuses %s with a 422 naming it, creating nothing', async (_label, attributes, pointer) => {
    const before = await countRuns(acme.workspaceId);
    expectError(await create(acme.organizationToken, attributes), 422, pointer);
    expect(await countRuns(acme.workspaceId)).toBe(before);
  });

  it("records the acting principal's service user: team, organization and site admin", async () => {
    const teamToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
    await grantWorkspace(h, acme.organizationToken, acme.teamId, acme.workspaceId, { access: 'write' });
    const byTeam = await create(teamToken, {});
    expect(byTeam.body.data.relationships['created-by'].data).toEqual({ type: 'users', id: `user-api-${acme.teamId}` });
    const byAdmin = await create(h.adminToken, {});
    expect(byAdmin.body.data.relationships['created-by'].data).toEqual({ type: 'users', id: 'user-site-admin' });
    const included = await api(h, 'get', `/runs/${byTeam.body.data.id}?include=created_by`, acme.organizationToken);
    expect(included.body.included).toEqual([
      {
        id: `user-api-${acme.teamId}`,
        type: 'users',
        attributes: { username: `api-${acme.teamId}`, 'is-service-account': true, 'avatar-url': null, 'v2-only': true },
      },
    ]);
  });

  it('records who confirmed a run when it is applied, and nobody before', async () => {
    const runId = await createRun(h, acme.organizationToken, acme.workspaceId);
    expect(await h.orm.em.fork().nativeUpdate(Run, { id: runId }, { status: 'planned' })).toBe(1);
    const before = await api(h, 'get', `/runs/${runId}`, acme.organizationToken);
    expect(before.body.data.relationships['confirmed-by']).toEqual({ data: null });
    expect((await api(h, 'post', `/runs/${runId}/actions/apply`, h.adminToken)).status).toBe(202);
    const after = await api(h, 'get', `/runs/${runId}`, acme.organizationToken);
    expect(after.body.data.relationships['confirmed-by']).toEqual({ data: { type: 'users', id: 'user-site-admin' } });
  });

  it('includes the workspace (with permissions) and the configuration version, on a run and on the list', async () => {
    const runId = await createRun(h, acme.organizationToken, acme.workspaceId);
    const shown = await api(h, 'get', `/runs/${runId}?include=workspace,configuration_version,plan`, acme.organizationToken);
    expect(shown.status).toBe(200);
    const types = (shown.body.included as { type: string; id: string; attributes: Record<string, unknown> }[]).map((r) => [r.type, r.id]);
    expect(types).toEqual([
      ['plans', shown.body.data.relationships.plan.data.id],
      ['workspaces', acme.workspaceId],
    ]);
    expect(shown.body.included[1].attributes.permissions['can-queue-run']).toBe(true);
    const list = await api(h, 'get', `/workspaces/${acme.workspaceId}/runs?include=workspace,created_by`, acme.organizationToken);
    expect(list.status).toBe(200);
    const included = (list.body.included as { type: string }[]).map((resource) => resource.type);
    // Once each, however many runs name them.
    expect(included.filter((type) => type === 'workspaces')).toHaveLength(1);
    expect(new Set(included)).toEqual(new Set(['workspaces', 'users']));
    expectError(await api(h, 'get', `/runs/${runId}?include=cost_estimate`, acme.organizationToken), 400);
  });

  describe('list filters', () => {
    let f: Fixture;
    let planned: string;
    let planOnly: string;
    const list = (query: string) => api(h, 'get', `/workspaces/${f.workspaceId}/runs?${query}`, f.organizationToken);
    const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((run) => run.id).sort();

    beforeAll(async () => {
      f = await seedOrganization(h, uniqueName('runfilter'));
      planned = await createRun(h, f.organizationToken, f.workspaceId);
      expect(await h.orm.em.fork().nativeUpdate(Run, { id: planned }, { status: 'planned' })).toBe(1);
      planOnly = await createRun(h, f.organizationToken, f.workspaceId, { 'plan-only': true });
    });

    it.each<[string, () => string[]]>([
      ['filter[status]=planned', () => [planned]],
      ['filter[status]=pending,planned', () => [planned, planOnly].sort()],
      ['filter[status]=applied', () => []],
      ['filter[operation]=plan_only', () => [planOnly]],
      ['filter[operation]=plan_and_apply,save_plan', () => [planned]],
      ['filter[source]=tfe-api', () => [planned, planOnly].sort()],
      ['filter[source]=tfe-configuration-version', () => []],
      ['search[user]=someone', () => []],
      ['search[commit]=abc123', () => []],
      ['filter[status]=planned&filter[operation]=plan_only', () => []],
    ])('%s', async (query, expected) => {
      const res = await list(query);
      expect(res.status).toBe(200);
      expect(ids(res)).toEqual(expected());
      expect(res.body.meta.pagination['total-count']).toBe(expected().length);
    });

    it('finds runs by id or message with search[basic]', async () => {
      expect(ids(await list(`search[basic]=${planned}`))).toEqual([planned]);
      expect(ids(await list('search[basic]=QUEUED%20MANUALLY'))).toEqual([planned, planOnly].sort());
    });

    it('refuses an unknown operation and an empty filter by name', async () => {
      expect(expectError(await list('filter[operation]=sideways'), 422).source).toEqual({ parameter: 'filter[operation]' });
      expect(expectError(await list('filter[status]='), 422).source).toEqual({ parameter: 'filter[status]' });
    });
  });

  it("names each token's creator: the site admin for an organization token, the organization for a team token", async () => {
    const organizationToken = await api(h, 'post', `/organizations/${acme.organization}/authentication-token`, h.adminToken);
    expect(organizationToken.body.data.relationships['created-by']).toEqual({ data: { type: 'users', id: 'user-site-admin' } });
    const fresh = organizationToken.body.data.attributes.token as string;
    const teamToken = await api(h, 'post', `/teams/${acme.teamId}/authentication-token`, fresh);
    expect(teamToken.body.data.relationships).toEqual({
      team: { data: { type: 'teams', id: acme.teamId } },
      'created-by': { data: { type: 'users', id: `user-api-${organizationId}` } },
    });
    const shown = await api(h, 'get', `/teams/${acme.teamId}/authentication-token`, fresh);
    expect(shown.body.data.relationships['created-by']).toEqual(teamToken.body.data.relationships['created-by']);
  });
});
