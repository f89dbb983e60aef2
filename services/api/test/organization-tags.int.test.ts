import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, idsOf, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createTeam,
  createTeamToken,
  createWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { ISO, TAG_ID, byName, tagNamesIn } from './tags.fixtures.ts';

/**
 * An organization's tags as HCP Terraform (and go-tfe's OrganizationTags) have them: the list with its
 * counts and filters, deletes, tagging workspaces from the tag's side, and who may do each.
 */

describe('organization tags', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let memberToken: string;
  let manageToken: string;

  const tag = (fixture: Fixture, workspaceId: string, ...names: string[]) =>
    api(h, 'post', `/workspaces/${workspaceId}/relationships/tags`, fixture.organizationToken, byName(...names));
  const list = (fixture: Fixture, query = '', token = fixture.organizationToken) =>
    api(h, 'get', `/organizations/${fixture.organization}/tags${query}`, token);
  const idOf = async (fixture: Fixture, name: string): Promise<string> =>
    (await list(fixture, `?q=${name}`)).body.data.find((item: { attributes: { name: string } }) => item.attributes.name === name)
      .id as string;
  const countTags = async (organization: string): Promise<number> => {
    const rows = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ n: number }[]>('select count(*)::int as n from tags t join organizations o on o.id = t.organization_id where o.name = ?', [
        organization,
      ]);
    return rows[0]?.n ?? -1;
  };

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('orgtags'));
    other = await seedOrganization(h, uniqueName('orgtags-other'));
    memberToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
    const managers = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('managers'), { 'manage-workspaces': true });
    manageToken = await createTeamToken(h, acme.organizationToken, managers);
    await tag(acme, acme.workspaceId, 'app', 'apple', 'banana', 'cherry');
    await tag(other, other.workspaceId, 'app');
  });
  afterAll(async () => {
    await h?.close();
  });

  it("lists the organization's own tags by name with their counts, to every member", async () => {
    const res = await list(acme, '', memberToken);
    expect(res.status).toBe(200);
    expect(tagNamesIn(res)).toEqual(['app', 'apple', 'banana', 'cherry']);
    expect(res.body.data[0]).toEqual({
      id: expect.stringMatching(TAG_ID),
      type: 'tags',
      attributes: { name: 'app', 'created-at': ISO, 'instance-count': 1 },
      relationships: { organization: { data: { type: 'organizations', id: acme.organization } } },
    });
    expect(idsOf(res)).not.toContain(await idOf(other, 'app'));
  });

  it('searches with q, leaves out a workspace’s tags with filter[exclude][taggable][id], and pages', async () => {
    expect(tagNamesIn(await list(acme, '?q=APP'))).toEqual(['app', 'apple']);
    expect(tagNamesIn(await list(acme, '?q=%25'))).toEqual([]);
    const second = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('second'));
    await tag(acme, second, 'apple', 'date');
    expect(tagNamesIn(await list(acme, `?filter[exclude][taggable][id]=${second}`))).toEqual(['app', 'banana', 'cherry']);
    const page = await list(acme, '?page[size]=2&page[number]=3');
    expect(tagNamesIn(page)).toEqual(['date']);
    expect(page.body.meta.pagination).toMatchObject({ 'total-count': 5, 'total-pages': 3 });
  });

  it.each([
    ['q twice', '?q=a&q=b', 'q'],
    ['page[size] 0', '?page[size]=0', 'page[size]'],
  ])('refuses %s', async (_label, query, parameter) => {
    const res = await list(acme, query);
    expect(res.status).toBe(422);
    expect(res.body.errors[0].source).toEqual({ parameter });
  });

  it('answers 404 to another organization and to a missing one', async () => {
    expectNotFound(await list(acme, '', other.organizationToken));
    expectNotFound(await api(h, 'get', '/organizations/no-such-organization/tags', acme.organizationToken));
  });

  it('deletes tags by id, from every workspace, for those who manage workspaces', async () => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('doomed'));
    await tag(acme, workspaceId, 'doomed-1', 'doomed-2', 'kept');
    const ids = [await idOf(acme, 'doomed-1'), await idOf(acme, 'doomed-2')];
    const before = await countTags(acme.organization);
    const body = { data: ids.map((id) => ({ type: 'tags', id })) };
    expectNotFound(await api(h, 'delete', `/organizations/${acme.organization}/tags`, memberToken, body));
    expectNotFound(await api(h, 'delete', `/organizations/${acme.organization}/tags`, other.organizationToken, body));
    expect(await countTags(acme.organization)).toBe(before);
    const deleted = await api(h, 'delete', `/organizations/${acme.organization}/tags`, manageToken, body);
    expect(deleted.status).toBe(204);
    expect(await countTags(acme.organization)).toBe(before - 2);
    const workspace = await api(h, 'get', `/workspaces/${workspaceId}`, acme.organizationToken);
    expect(workspace.body.data.attributes['tag-names']).toEqual(['kept']);
  });

  it.each([
    ['no body', undefined, '/data'],
    ['an empty list', { data: [] }, '/data'],
    ['an unknown id after a real one', 'unknown', '/data/1/id'],
    ["another organization's tag", 'foreign', '/data/0/id'],
  ])('refuses a delete with %s, deleting nothing', async (_label, spec, pointer) => {
    const real = await idOf(acme, 'cherry');
    const bodies: Record<string, unknown> = {
      unknown: {
        data: [
          { type: 'tags', id: real },
          { type: 'tags', id: 'tag-doesnotexist0000' },
        ],
      },
      foreign: { data: [{ type: 'tags', id: await idOf(other, 'app') }] },
    };
    const body = typeof spec === 'string' ? bodies[spec] : spec;
    const before = [await countTags(acme.organization), await countTags(other.organization)];
    expectError(await api(h, 'delete', `/organizations/${acme.organization}/tags`, acme.organizationToken, body), 422, pointer);
    expect([await countTags(acme.organization), await countTags(other.organization)]).toEqual(before);
  });

  it('tags workspaces from the tag’s side, idempotently', async () => {
    const bananaId = await idOf(acme, 'banana');
    const first = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('side'));
    const second = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('side'));
    const body = { data: [first, second, first].map((id) => ({ type: 'workspaces', id })) };
    const res = await api(h, 'post', `/tags/${bananaId}/relationships/workspaces`, manageToken, body);
    expect(res.status).toBe(204);
    expect((await api(h, 'post', `/tags/${bananaId}/relationships/workspaces`, manageToken, body)).status).toBe(204);
    for (const id of [first, second]) {
      const tags = await api(h, 'get', `/workspaces/${id}/relationships/tags`, acme.organizationToken);
      expect(idsOf(tags)).toEqual([bananaId]);
    }
  });

  it('refuses workspaces it may not tag, and tags none of the request', async () => {
    const bananaId = await idOf(acme, 'banana');
    const fresh = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('fresh'));
    const send = (ids: string[], token = acme.organizationToken, tagId = bananaId) =>
      api(h, 'post', `/tags/${tagId}/relationships/workspaces`, token, { data: ids.map((id) => ({ type: 'workspaces', id })) });
    expectError(await send([fresh, 'ws-doesnotexist00000']), 422, '/data/1/id');
    expectError(await send([fresh, other.workspaceId]), 422, '/data/1/id');
    expectError(await send([]), 422, '/data');
    expectNotFound(await send([fresh], memberToken));
    expectNotFound(await send([fresh], other.organizationToken));
    expectNotFound(await send([fresh], acme.organizationToken, 'tag-doesnotexist0000'));
    const tags = await api(h, 'get', `/workspaces/${fresh}/relationships/tags`, acme.organizationToken);
    expect(tags.body.data).toEqual([]);
  });

  it("removes a deleted workspace's links, and an organization's tags with it", async () => {
    const name = uniqueName('gone');
    const organization = await createOrganization(h, name);
    const token = await createOrganizationToken(h, organization);
    const owner: Fixture = { organization, organizationToken: token, workspaceId: '', teamId: '' };
    const workspaceId = await createWorkspace(h, organization, token, 'w');
    await tag(owner, workspaceId, 'short-lived');
    expect((await api(h, 'delete', `/workspaces/${workspaceId}`, token)).status).toBe(204);
    expect((await list(owner)).body.data[0].attributes['instance-count']).toBe(0);
    expect(await countTags(organization)).toBe(1);
    expect((await api(h, 'delete', `/organizations/${organization}`, token)).status).toBe(204);
    expect(await countTags(organization)).toBe(0);
    const orphans = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ n: number }[]>(
        'select count(*)::int as n from tags t where not exists (select 1 from organizations o where o.id = t.organization_id)',
      );
    expect(orphans[0]?.n).toBe(0);
  });
});
