import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { api, createOrganization, createOrganizationToken, createRun, createWorkspace } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests of workspaces as go-tfe reads and writes them: every setting stored and returned with
 * HCP's default, refusals of what this service lacks, and the list's include, sort and search.
 */

const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
const document = (attributes: Record<string, unknown>, relationships?: Record<string, unknown>) => ({
  data: { type: 'workspaces', attributes, ...(relationships && { relationships }) },
});

describe('workspace settings, list and safe delete', () => {
  let h: Harness;
  let organization: string;
  let token: string;

  const create = (attributes: Record<string, unknown>, relationships?: Record<string, unknown>) =>
    api(h, 'post', `/organizations/${organization}/workspaces`, token, document(attributes, relationships));

  beforeAll(async () => {
    h = await startHarness();
    organization = await createOrganization(h, uniqueName('settings'));
    token = await createOrganizationToken(h, organization);
  });
  afterAll(async () => {
    await h.close();
  });

  it("returns a new workspace whole, with HCP's defaults", async () => {
    const name = uniqueName('golden');
    const res = await create({ name });
    expect(res.status).toBe(201);
    const id = res.body.data.id as string;
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^ws-[A-Za-z0-9]{16}$/),
      type: 'workspaces',
      attributes: {
        name,
        description: null,
        'auto-apply': false,
        'working-directory': '',
        'terraform-version': '1.9.0',
        'execution-mode': 'remote',
        operations: true,
        'allow-destroy-plan': true,
        'assessments-enabled': false,
        'auto-apply-run-trigger': false,
        'auto-destroy-at': null,
        'auto-destroy-activity-duration': null,
        'inherits-project-auto-destroy': true,
        'file-triggers-enabled': true,
        'global-remote-state': false,
        'queue-all-runs': false,
        'speculative-enabled': true,
        'structured-run-output-enabled': true,
        'source-name': null,
        'source-url': null,
        'trigger-prefixes': [],
        'trigger-patterns': [],
        'setting-overwrites': { 'execution-mode': false, 'agent-pool': false },
        'vcs-repo': null,
        actions: { 'is-destroyable': true },
        'can-queue-destroy-plan': true,
        environment: 'default',
        'no-code-upgrade-available': false,
        'resource-count': 0,
        'apply-duration-average': null,
        'plan-duration-average': null,
        'policy-check-failures': null,
        'tag-names': [],
        'created-at': ISO,
        'updated-at': ISO,
        'run-failures': 0,
        'workspace-kpis-runs-count': 0,
        locked: false,
        permissions: expect.objectContaining({ 'can-update': true, 'can-destroy': true }),
      },
      relationships: {
        organization: { data: { id: organization, type: 'organizations' } },
        'current-run': { data: null },
        'latest-run': { data: null },
        'current-configuration-version': { data: null },
        'locked-by': { data: null },
      },
      links: {
        self: `/api/v2/organizations/${organization}/workspaces/${name}`,
        'self-html': `/app/${organization}/workspaces/${name}`,
      },
    });
    const shown = await api(h, 'get', `/workspaces/${id}`, token);
    expect(shown.body.data).toEqual(res.body.data);
  });

  const settings: [string, unknown, unknown][] = [
    ['allow-destroy-plan', false, false],
    ['assessments-enabled', true, true],
    ['auto-apply-run-trigger', true, true],
    ['auto-destroy-at', '2030-01-01T00:00:00Z', '2030-01-01T00:00:00.000Z'],
    ['auto-destroy-activity-duration', '14d', '14d'],
    ['inherits-project-auto-destroy', false, false],
    ['file-triggers-enabled', false, false],
    ['global-remote-state', true, true],
    ['queue-all-runs', 'true', true],
    ['speculative-enabled', false, false],
    ['structured-run-output-enabled', false, false],
    ['trigger-prefixes', ['/modules', '/shared'], ['/modules', '/shared']],
    ['trigger-patterns', ['/modules/**/*'], ['/modules/**/*']],
    ['description', 'infra', 'infra'],
    ['working-directory', 'envs/prod', 'envs/prod'],
    ['terraform-version', '1.10.2', '1.10.2'],
    ['execution-mode', 'local', 'local'],
  ];

  it.each(settings)('stores %s at creation and by update, and returns it', async (attribute, sent, returned) => {
    const created = await create({ name: uniqueName('set'), [attribute]: sent });
    expect(created.status).toBe(201);
    expect(created.body.data.attributes[attribute]).toEqual(returned);
    const id = created.body.data.id as string;
    expect((await api(h, 'get', `/workspaces/${id}`, token)).body.data.attributes[attribute]).toEqual(returned);

    const fresh = await create({ name: uniqueName('upd') });
    const updated = await api(h, 'patch', `/workspaces/${fresh.body.data.id}`, token, document({ [attribute]: sent }));
    expect(updated.status).toBe(200);
    expect(updated.body.data.attributes[attribute]).toEqual(returned);
  });

  it('stores source-name and source-url at creation', async () => {
    const res = await create({ name: uniqueName('src'), 'source-name': 'my-app', 'source-url': 'https://my-app.example' });
    expect(res.body.data.attributes).toMatchObject({ 'source-name': 'my-app', 'source-url': 'https://my-app.example' });
  });

  it('maps the deprecated operations to the execution mode, and marks it as overwritten', async () => {
    const res = await create({ name: uniqueName('ops'), operations: false });
    expect(res.body.data.attributes).toMatchObject({
      'execution-mode': 'local',
      operations: false,
      'setting-overwrites': { 'execution-mode': true, 'agent-pool': false },
    });
  });

  it("inherits the organization's default execution mode unless one is given", async () => {
    const local = await createOrganization(h, uniqueName('local-default'));
    const localToken = await createOrganizationToken(h, local);
    const patch = { data: { type: 'organizations', attributes: { 'default-execution-mode': 'local' } } };
    expect((await api(h, 'patch', `/organizations/${local}`, localToken, patch)).status).toBe(200);
    const inLocal = (attributes: Record<string, unknown>) =>
      api(h, 'post', `/organizations/${local}/workspaces`, localToken, document({ name: uniqueName('inh'), ...attributes }));
    const inherited = await inLocal({ 'setting-overwrites': { 'execution-mode': false } });
    expect(inherited.body.data.attributes).toMatchObject({ 'execution-mode': 'local', 'setting-overwrites': { 'execution-mode': false } });
    expect((await inLocal({})).body.data.attributes['execution-mode']).toBe('local');
    const explicit = await inLocal({ 'execution-mode': 'remote' });
    expect(explicit.body.data.attributes).toMatchObject({ 'execution-mode': 'remote', 'setting-overwrites': { 'execution-mode': true } });
  });

  it('clears auto-destroy-at with null, and setting one trigger list clears the other', async () => {
    const res = await create({ name: uniqueName('clr'), 'auto-destroy-at': '2030-01-01T00:00:00Z', 'trigger-prefixes': ['/a'] });
    const id = res.body.data.id as string;
    const updated = await api(h, 'patch', `/workspaces/${id}`, token, document({ 'auto-destroy-at': null, 'trigger-patterns': ['/b/**'] }));
    expect(updated.body.data.attributes).toMatchObject({ 'auto-destroy-at': null, 'trigger-prefixes': [], 'trigger-patterns': ['/b/**'] });
  });

  const refusals: [string, Record<string, unknown>, Record<string, unknown> | undefined, string][] = [
    ['an agent pool', { 'agent-pool-id': 'apool-123' }, undefined, '/data/attributes/agent-pool-id'],
    ['a VCS repository', { 'vcs-repo': { identifier: 'acme/infra' } }, undefined, '/data/attributes/vcs-repo'],
    ['a migration environment', { 'migration-environment': 'tfe' }, undefined, '/data/attributes/migration-environment'],
    ['a tag name HCP does not allow', { 'tag-names': ['a/b'] }, undefined, '/data/attributes/tag-names/0'],
    ['a tag id of no tag', {}, { tags: { data: [{ type: 'tags', id: 'tag-doesnotexist0000' }] } }, '/data/relationships/tags/data/0/id'],
    [
      'tag bindings',
      {},
      { 'tag-bindings': { data: [{ type: 'tag-bindings', attributes: { key: 'k' } }] } },
      '/data/relationships/tag-bindings/data',
    ],
    ['both trigger lists', { 'trigger-prefixes': ['/a'], 'trigger-patterns': ['/b'] }, undefined, '/data/attributes/trigger-patterns'],
    ['operations against execution-mode', { operations: true, 'execution-mode': 'local' }, undefined, '/data/attributes/operations'],
    [
      'an activity duration without unit',
      { 'auto-destroy-activity-duration': '14' },
      undefined,
      '/data/attributes/auto-destroy-activity-duration',
    ],
    ['an auto-destroy-at that is no time', { 'auto-destroy-at': 'soon' }, undefined, '/data/attributes/auto-destroy-at'],
    ['a non-boolean queue-all-runs', { 'queue-all-runs': 'often' }, undefined, '/data/attributes/queue-all-runs'],
    ['a trigger prefix that is no text', { 'trigger-prefixes': [3] }, undefined, '/data/attributes/trigger-prefixes/0'],
  ];

  it.each(refusals)('refuses %s with a 422 naming it, and creates nothing', async (_label, attributes, relationships, pointer) => {
    const name = uniqueName('refused');
    expectError(await create({ name, ...attributes }, relationships), 422, pointer);
    expect((await api(h, 'get', `/organizations/${organization}/workspaces/${name}`, token)).status).toBe(404);
  });

  it('accepts the "nothing set" values of what it lacks', async () => {
    const res = await create(
      { name: uniqueName('nulls'), 'agent-pool-id': null, 'vcs-repo': null, 'migration-environment': null },
      { tags: { data: [] }, 'tag-bindings': { data: [] } },
    );
    expect(res.status).toBe(201);
  });

  it('refuses a bad update with a 422 and changes nothing', async () => {
    const res = await create({ name: uniqueName('keep'), 'queue-all-runs': true });
    const id = res.body.data.id as string;
    expectError(
      await api(h, 'patch', `/workspaces/${id}`, token, document({ 'queue-all-runs': false, 'vcs-repo': {} })),
      422,
      '/data/attributes/vcs-repo',
    );
    expect((await api(h, 'get', `/workspaces/${id}`, token)).body.data.attributes['queue-all-runs']).toBe(true);
  });
});

describe('workspace list: include, sort, search; current run', () => {
  let h: Harness;
  let organization: string;
  let token: string;
  const ids: Record<string, string> = {};
  const runs: Record<string, string> = {};
  const list = (query: string) => api(h, 'get', `/organizations/${organization}/workspaces?${query}`, token);
  const names = (res: { body: { data: { attributes: { name: string } }[] } }) => res.body.data.map((item) => item.attributes.name);

  beforeAll(async () => {
    h = await startHarness();
    organization = await createOrganization(h, uniqueName('listing'));
    token = await createOrganizationToken(h, organization);
    for (const name of ['alpha-prod', 'beta-prod', 'gamma-dev']) ids[name] = await createWorkspace(h, organization, token, name);
    const tags: Record<string, string[]> = { 'alpha-prod': ['prod', 'team:a'], 'beta-prod': ['prod'], 'gamma-dev': ['dev'] };
    for (const [name, tagNames] of Object.entries(tags)) {
      const body = { data: tagNames.map((tag) => ({ type: 'tags', attributes: { name: tag } })) };
      const res = await api(h, 'post', `/workspaces/${ids[name]}/relationships/tags`, token, body);
      if (res.status !== 204) throw new Error(`tag ${name}: ${res.status} ${res.text}`);
    }
    // gamma's run first, then beta's: the current-run sort differs from the name sort.
    runs['gamma-dev'] = await createRun(h, token, ids['gamma-dev'] ?? '');
    runs['beta-prod'] = await createRun(h, token, ids['beta-prod'] ?? '');
    await createRun(h, token, ids['beta-prod'] ?? '', { 'plan-only': true });
  });
  afterAll(async () => {
    await h.close();
  });

  it('sorts by name by default and on request, reversed with a hyphen', async () => {
    expect(names(await list(''))).toEqual(['alpha-prod', 'beta-prod', 'gamma-dev']);
    expect(names(await list('sort=-name'))).toEqual(['gamma-dev', 'beta-prod', 'alpha-prod']);
  });

  it('sorts by the current run, workspaces without one last', async () => {
    expect(names(await list('sort=current-run.created-at'))).toEqual(['gamma-dev', 'beta-prod', 'alpha-prod']);
    expect(names(await list('sort=-current-run.created-at'))).toEqual(['beta-prod', 'gamma-dev', 'alpha-prod']);
  });

  it('names the latest run that is not plan-only as the current run, and counts every run', async () => {
    const shown = await api(h, 'get', `/workspaces/${ids['beta-prod']}`, token);
    expect(shown.body.data.relationships['current-run']).toEqual({ data: { id: runs['beta-prod'], type: 'runs' } });
    expect(shown.body.data.relationships['latest-run'].data.id).not.toBe(runs['beta-prod']);
    expect(shown.body.data.attributes['workspace-kpis-runs-count']).toBe(2);
  });

  it('includes the current run and the organization', async () => {
    const res = await list('include=current_run,organization');
    expect(res.status).toBe(200);
    const included = res.body.included as { type: string; id: string }[];
    expect(
      included
        .filter((item) => item.type === 'runs')
        .map((item) => item.id)
        .sort(),
    ).toEqual([runs['beta-prod'], runs['gamma-dev']].sort());
    expect(included.filter((item) => item.type === 'organizations').map((item) => item.id)).toEqual([organization]);
    const shown = await api(h, 'get', `/workspaces/${ids['gamma-dev']}?include=current-run`, token);
    expect(shown.body.included[0]).toMatchObject({ id: runs['gamma-dev'], type: 'runs' });
  });

  it.each([
    ['search[name]=PROD', ['alpha-prod', 'beta-prod']],
    ['search[name]=a-p', ['alpha-prod', 'beta-prod']],
    ['search[name]=%25', []],
    ['search[wildcard-name]=*-dev', ['gamma-dev']],
    ['search[wildcard-name]=alpha-*', ['alpha-prod']],
    ['search[wildcard-name]=alpha', []],
    ['search[tags]=a', []],
    ['search[exclude-tags]=a', ['alpha-prod', 'beta-prod', 'gamma-dev']],
    ['search[tags]=prod', ['alpha-prod', 'beta-prod']],
    ['search[tags]=team:a, prod', ['alpha-prod']],
    ['search[tags]=prod,dev', []],
    ['search[tags]=PROD', []],
    ['search[exclude-tags]=prod', ['gamma-dev']],
    ['search[exclude-tags]=dev,team:a', ['beta-prod']],
    ['search[tags]=prod&search[exclude-tags]=team:a&search[name]=prod', ['beta-prod']],
    ['search[tags]=prod&sort=-name', ['beta-prod', 'alpha-prod']],
    [
      'search[exclude-tags]=team:a&filter[current-run][status]=pending,planned,planned_and_finished,applied,errored',
      ['beta-prod', 'gamma-dev'],
    ],
    ['filter[current-run][status]=pending,planned,planned_and_finished,applied,errored', ['beta-prod', 'gamma-dev']],
  ])('filters with %s', async (query, expected) => {
    const res = await list(query);
    expect(res.status).toBe(200);
    expect(names(res)).toEqual(expected);
    expect(res.body.meta.pagination['total-count']).toBe(expected.length);
  });

  it('pages a tag search, counting every match', async () => {
    const res = await list('search[tags]=prod&page[size]=1&page[number]=2');
    expect(names(res)).toEqual(['beta-prod']);
    expect(res.body.meta.pagination).toMatchObject({ 'total-count': 2, 'total-pages': 2 });
    expect((await list('search[tags]=prod')).body.data[0].attributes['tag-names']).toEqual(['prod', 'team:a']);
  });

  it.each([
    ['search[tags]=a&search[tags]=b', 422, 'search[tags]'],
    ['include=readme', 400, 'include'],
    ['sort=created-at', 422, 'sort'],
    ['search[name]=a&search[name]=b', 422, 'search[name]'],
    ['filter[current-run][status]=sleeping', 422, 'filter[current-run][status]'],
  ])('refuses %s', async (query, status, parameter) => {
    const res = await list(query);
    expect(res.status).toBe(status);
    expect(res.body.errors[0].source).toEqual({ parameter });
  });
});
