import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  api,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';

interface Listed {
  data: { id: string; relationships: { workspace: { data: { id: string } } } }[];
  included?: { type: string; attributes: { name?: string } }[];
  meta: { pagination: Record<string, number | null> };
  links: Record<string, string | null>;
}

/**
 * `GET /organizations/:org/runs` (go-tfe's Runs.ListForOrganization): the organization's runs in the
 * workspaces the caller reads, newest first, HCP's filters, and pagination without totals.
 */
describe("an organization's runs", () => {
  let h: Harness;
  let f: Fixture;
  let otherWorkspace: string;
  let readerToken: string;
  const runs: { a: string[]; b: string[] } = { a: [], b: [] };

  const list = async (token: string, query = ''): Promise<Listed> =>
    (await api(h, 'get', `/organizations/${f.organization}/runs${query}`, token).expect(200)).body as Listed;
  const ids = (listed: Listed): string[] => listed.data.map((run) => run.id);

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'org-runs');
    otherWorkspace = await createWorkspace(h, f.organization, f.organizationToken, 'org-runs-other');
    // A team that reads the first workspace only.
    const readers = await createTeam(h, f.organization, f.organizationToken, 'readers');
    await grantWorkspace(h, f.organizationToken, readers, f.workspaceId, { access: 'read' });
    readerToken = await createTeamToken(h, f.organizationToken, readers);
    runs.a.push(await createRun(h, f.organizationToken, f.workspaceId, { message: 'first' }));
    runs.b.push(await createRun(h, f.organizationToken, otherWorkspace, { message: 'second', 'plan-only': true }));
    runs.a.push(await createRun(h, f.organizationToken, f.workspaceId, { message: 'third' }));
  }, 30_000);

  afterAll(async () => {
    await h?.close();
  });

  it('lists every run of the organization, newest first, with pagination that has no totals', async () => {
    const all = await list(f.organizationToken);
    expect(ids(all)).toEqual([runs.a[1], runs.b[0], runs.a[0]]);
    expect(all.meta.pagination).toEqual({ 'current-page': 1, 'page-size': 20, 'prev-page': null, 'next-page': null });
    expect(Object.keys(all.links).sort()).toEqual(['next', 'prev', 'self']);

    const first = await list(f.organizationToken, '?page[size]=2');
    expect(ids(first)).toEqual([runs.a[1], runs.b[0]]);
    expect(first.meta.pagination).toMatchObject({ 'current-page': 1, 'next-page': 2, 'prev-page': null });
    expect(new URL(first.links['next'] ?? '').searchParams.get('page[number]')).toBe('2');
    const second = await list(f.organizationToken, '?page[size]=2&page[number]=2');
    expect(ids(second)).toEqual([runs.a[0]]);
    expect(second.meta.pagination).toMatchObject({ 'current-page': 2, 'next-page': null, 'prev-page': 1 });
    const beyond = await list(f.organizationToken, '?page[number]=999');
    expect(beyond.data).toEqual([]);
    expect(beyond.meta.pagination['current-page']).toBe(999);
  });

  it("shows a team only the runs of workspaces it reads, and other organizations' callers nothing", async () => {
    expect(ids(await list(readerToken))).toEqual([runs.a[1], runs.a[0]]);
    const other = await seedOrganization(h, 'org-runs-stranger');
    await api(h, 'get', `/organizations/${f.organization}/runs`, other.organizationToken).expect(404);
    await api(h, 'get', `/organizations/nonexisting/runs`, f.organizationToken).expect(404);
    await api(h, 'get', `/organizations/${f.organization}/runs`).expect(401);
    expect(ids(await list(h.adminToken))).toEqual([runs.a[1], runs.b[0], runs.a[0]]);
  });

  it('filters by workspace names, status, status group, operation, search and timeframe', async () => {
    expect(ids(await list(f.organizationToken, '?filter[workspace_names]=org-runs-other'))).toEqual(runs.b);
    expect(ids(await list(f.organizationToken, `?filter[workspace_names]=org-runs-other,${f.organization}-ws`))).toHaveLength(3);
    expect(ids(await list(f.organizationToken, '?filter[operation]=plan_only'))).toEqual(runs.b);
    expect(ids(await list(f.organizationToken, '?search[basic]=third'))).toEqual([runs.a[1]]);
    expect(ids(await list(f.organizationToken, '?filter[agent_pool_names]=pool'))).toEqual([]);
    expect(ids(await list(f.organizationToken, '?filter[timeframe]=2001'))).toEqual([]);
    const thisYear = String(new Date().getUTCFullYear());
    expect(ids(await list(f.organizationToken, `?filter[timeframe]=${thisYear}`))).toHaveLength(3);

    await api(h, 'post', `/runs/${runs.a[0]}/actions/discard`, f.organizationToken).expect(202);
    expect(ids(await list(f.organizationToken, '?filter[status_group]=final'))).toEqual([runs.a[0]]);
    expect(ids(await list(f.organizationToken, '?filter[status_group]=non_final'))).toEqual([runs.a[1], runs.b[0]]);
    expect(ids(await list(f.organizationToken, '?filter[status]=discarded'))).toEqual([runs.a[0]]);
  });

  it('includes the workspaces on request, and refuses an unknown filter value by name', async () => {
    const listed = await list(f.organizationToken, '?include=workspace&filter[workspace_names]=org-runs-other');
    expect(listed.included?.map((resource) => [resource.type, resource.attributes.name])).toEqual([['workspaces', 'org-runs-other']]);
    const refused = await api(h, 'get', `/organizations/${f.organization}/runs?filter[status_group]=someday`, f.organizationToken);
    expect(refused.status).toBe(422);
    expect(refused.body.errors[0].source).toEqual({ parameter: 'filter[status_group]' });
    const timeframe = await api(h, 'get', `/organizations/${f.organization}/runs?filter[timeframe]=soon`, f.organizationToken);
    expect(timeframe.status).toBe(422);
  });
});
