import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { ISO, TAG_ID, byId, byName, tagNamesIn } from './tags.fixtures.ts';
import { Organization } from '@runtasks/shared/db';
import { linkTags } from '../src/services/tag.service.ts';

/**
 * Workspace tags as HCP Terraform (and go-tfe's AddTags, RemoveTags and ListTags)
 * have them: the `tags` document, a workspace's tag routes, tags at creation and update, who may do
 * what, and refusals that change nothing.
 */

const workspaceDocument = (attributes: Record<string, unknown>, relationships?: Record<string, unknown>) => ({
  data: { type: 'workspaces', attributes, ...(relationships && { relationships }) },
});

describe('workspace tags', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let readToken: string;
  let manageToken: string;

  const tagsOf = (workspaceId: string, token = acme.organizationToken, query = '') =>
    api(h, 'get', `/workspaces/${workspaceId}/relationships/tags${query}`, token);
  const tag = (workspaceId: string, body: unknown, token = acme.organizationToken) =>
    api(h, 'post', `/workspaces/${workspaceId}/relationships/tags`, token, body);
  const untag = (workspaceId: string, body: unknown, token = acme.organizationToken) =>
    api(h, 'delete', `/workspaces/${workspaceId}/relationships/tags`, token, body);
  const organizationTags = (fixture: Fixture, query = '', token = fixture.organizationToken) =>
    api(h, 'get', `/organizations/${fixture.organization}/tags${query}`, token);
  const tagNamesOf = async (workspaceId: string): Promise<string[]> =>
    (await api(h, 'get', `/workspaces/${workspaceId}`, acme.organizationToken)).body.data.attributes['tag-names'] as string[];
  /** Every tag of every organization, with its links: what a refused request must leave as it was. */
  const tagState = async (): Promise<string> => {
    const rows = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ state: string | null }[]>(
        `select string_agg(concat_ws(',', t.id, t.name, (select string_agg(wt.workspace_id, ' ' order by wt.workspace_id)
                                                           from workspace_tags wt where wt.tag_id = t.id)), '|' order by t.id) as state
           from tags t`,
      );
    return rows[0]?.state ?? '';
  };
  const newWorkspace = (fixture: Fixture = acme) => createWorkspace(h, fixture.organization, fixture.organizationToken, uniqueName('ws'));

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('tags'));
    other = await seedOrganization(h, uniqueName('tags-other'));
    await grantWorkspace(h, acme.organizationToken, acme.teamId, acme.workspaceId, { access: 'read' });
    readToken = await createTeamToken(h, acme.organizationToken, acme.teamId);
    const managers = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('managers'), { 'manage-workspaces': true });
    manageToken = await createTeamToken(h, acme.organizationToken, managers);
  });
  afterAll(async () => {
    await h?.close();
  });

  it('tags a workspace by name and lists its tags as HCP documents them', async () => {
    const workspaceId = await newWorkspace();
    const added = await tag(workspaceId, byName('prod', 'team:a-b_c'));
    expect(added.status).toBe(204);
    expect(added.text).toBe('');
    const listed = await tagsOf(workspaceId);
    expect(listed.status).toBe(200);
    const [first] = listed.body.data as { id: string }[];
    expect(first?.id).toMatch(TAG_ID);
    expect(listed.body.data[0]).toEqual({
      id: first?.id,
      type: 'tags',
      attributes: { name: 'prod', 'created-at': ISO, 'instance-count': 1 },
      relationships: { organization: { data: { type: 'organizations', id: acme.organization } } },
    });
    expect(tagNamesIn(listed)).toEqual(['prod', 'team:a-b_c']);
    expect(listed.body.meta.pagination).toMatchObject({ 'current-page': 1, 'total-count': 2 });
    expect(await tagNamesOf(workspaceId)).toEqual(['prod', 'team:a-b_c']);
  });

  it('adds idempotently, by id or name, keeping the tags a workspace has; tag-names are sorted by code point', async () => {
    const first = await newWorkspace();
    const second = await newWorkspace();
    expect((await tag(first, byName('b', 'B'))).status).toBe(204);
    const shared = (await tagsOf(first)).body.data.find((item: { attributes: { name: string } }) => item.attributes.name === 'b');
    expect(
      (
        await tag(second, {
          data: [
            { type: 'tags', id: shared.id },
            { type: 'tags', attributes: { name: 'a' } },
          ],
        })
      ).status,
    ).toBe(204);
    expect((await tag(second, byName('a', 'a'))).status).toBe(204);
    expect(await tagNamesOf(second)).toEqual(['a', 'b']);
    expect(await tagNamesOf(first)).toEqual(['B', 'b']);
    const listed = await tagsOf(second);
    expect(listed.body.data.find((item: { id: string }) => item.id === shared.id).attributes['instance-count']).toBe(2);
  });

  it('gives workspaces included in a run document their tag-names too', async () => {
    const workspaceId = await newWorkspace();
    await tag(workspaceId, byName('in-run', 'also'));
    const runId = await createRun(h, acme.organizationToken, workspaceId);
    const run = await api(h, 'get', `/runs/${runId}?include=workspace`, acme.organizationToken);
    expect(run.status).toBe(200);
    const included = (run.body.included as { type: string; id: string; attributes: Record<string, unknown> }[]).find(
      (item) => item.type === 'workspaces',
    );
    expect(included).toMatchObject({ id: workspaceId, attributes: { 'tag-names': ['also', 'in-run'] } });
  });

  it('finds tags by part of their name and pages them', async () => {
    const workspaceId = await newWorkspace();
    await tag(workspaceId, byName('env-prod', 'env-dev', 'owner'));
    expect(tagNamesIn(await tagsOf(workspaceId, acme.organizationToken, '?name=ENV'))).toEqual(['env-dev', 'env-prod']);
    const page = await tagsOf(workspaceId, acme.organizationToken, '?page[size]=2&page[number]=2');
    expect(tagNamesIn(page)).toEqual(['owner']);
    expect(page.body.meta.pagination).toMatchObject({ 'current-page': 2, 'total-pages': 2, 'total-count': 3 });
  });

  it('removes tags by name or id, ignores tags the workspace does not have, and keeps them in the organization', async () => {
    const workspaceId = await newWorkspace();
    await tag(workspaceId, byName('keep', 'drop-by-name', 'drop-by-id'));
    const dropId = (await tagsOf(workspaceId)).body.data.find(
      (item: { attributes: { name: string } }) => item.attributes.name === 'drop-by-id',
    ).id;
    const removed = await untag(workspaceId, {
      data: [
        { type: 'tags', attributes: { name: 'drop-by-name' } },
        { type: 'tags', id: dropId },
      ],
    });
    expect(removed.status).toBe(204);
    expect(await tagNamesOf(workspaceId)).toEqual(['keep']);
    expect((await untag(workspaceId, byName('never-existed'))).status).toBe(204);
    expect((await untag(workspaceId, byId('tag-doesnotexist0000'))).status).toBe(204);
    expect(await tagNamesOf(workspaceId)).toEqual(['keep']);
    const kept = await organizationTags(acme, '?q=drop-by-name');
    expect(kept.body.data.map((item: { attributes: Record<string, unknown> }) => item.attributes)).toEqual([
      { name: 'drop-by-name', 'created-at': ISO, 'instance-count': 0 },
    ]);
  });

  it.each([
    ['an empty list', { data: [] }, '/data'],
    ['no list', {}, '/data'],
    ['a tag with neither id nor name', { data: [{ type: 'tags' }] }, '/data/0'],
    ['a name with a space', byName('ok', 'not ok'), '/data/1/attributes/name'],
    ['an empty name', byName(''), '/data/0/attributes/name'],
    ['a name of 256 characters', byName('x'.repeat(256)), '/data/0/attributes/name'],
    ['another type', { data: [{ type: 'workspaces', attributes: { name: 'a' } }] }, '/data/0/type'],
    ['more than 100 tags', byName(...Array.from({ length: 101 }, (_, index) => `t${index}`)), '/data'],
  ])('refuses to add %s with a 422 at its pointer, changing nothing', async (_label, body, pointer) => {
    const before = await tagState();
    expectError(await tag(acme.workspaceId, body), 422, pointer);
    expect(await tagState()).toBe(before);
  });

  it("refuses an id that is no tag of the workspace's organization, creating none of the request's new names", async () => {
    expect((await tag(other.workspaceId, byName('foreign'), other.organizationToken)).status).toBe(204);
    const foreignId = (await tagsOf(other.workspaceId, other.organizationToken)).body.data[0].id as string;
    const before = await tagState();
    for (const id of ['tag-doesnotexist0000', foreignId]) {
      const res = await tag(acme.workspaceId, {
        data: [
          { type: 'tags', attributes: { name: 'brand-new' } },
          { type: 'tags', id },
        ],
      });
      expectError(res, 422, '/data/1/id');
    }
    expect(await tagState()).toBe(before);
  });

  it('names 255 characters as the longest tag name', async () => {
    const workspaceId = await newWorkspace();
    expect((await tag(workspaceId, byName('y'.repeat(255)))).status).toBe(204);
    expect(await tagNamesOf(workspaceId)).toEqual(['y'.repeat(255)]);
  });

  it('lets readers list tags, but only those who may update the workspace tag or untag it', async () => {
    await tag(acme.workspaceId, byName('visible'));
    expect(tagNamesIn(await tagsOf(acme.workspaceId, readToken))).toContain('visible');
    const before = await tagState();
    expectNotFound(await tag(acme.workspaceId, byName('by-reader'), readToken));
    expectNotFound(await untag(acme.workspaceId, byName('visible'), readToken));
    // Another organization's owner: the workspace does not exist for it, whatever the body says.
    expectNotFound(await tagsOf(acme.workspaceId, other.organizationToken));
    expectNotFound(await tag(acme.workspaceId, { data: [] }, other.organizationToken));
    expectNotFound(await untag(acme.workspaceId, {}, other.organizationToken));
    expectNotFound(await tag('ws-doesnotexist00000', byName('x')));
    expect(await tagState()).toBe(before);
    expect((await tag(acme.workspaceId, byName('by-manager'), manageToken)).status).toBe(204);
    expect((await untag(acme.workspaceId, byName('by-manager'), manageToken)).status).toBe(204);
  });

  it('takes tag-names and the tags relationship at creation, and an update replaces the tags', async () => {
    await tag(acme.workspaceId, byName('existing'));
    const existingId = (await organizationTags(acme, '?q=existing')).body.data[0].id as string;
    const name = uniqueName('created');
    const created = await api(
      h,
      'post',
      `/organizations/${acme.organization}/workspaces`,
      acme.organizationToken,
      workspaceDocument(
        { name, 'tag-names': ['zeta', 'alpha'] },
        {
          tags: {
            data: [
              { type: 'tags', attributes: { name: 'mid' } },
              { type: 'tags', id: existingId },
            ],
          },
        },
      ),
    );
    expect(created.status).toBe(201);
    expect(created.body.data.attributes['tag-names']).toEqual(['alpha', 'existing', 'mid', 'zeta']);
    const id = created.body.data.id as string;
    const updated = await api(h, 'patch', `/workspaces/${id}`, acme.organizationToken, workspaceDocument({ 'tag-names': ['only'] }));
    expect(updated.status).toBe(200);
    expect(updated.body.data.attributes['tag-names']).toEqual(['only']);
    const untouched = await api(h, 'patch', `/workspaces/${id}`, acme.organizationToken, workspaceDocument({ description: 'd' }));
    expect(untouched.body.data.attributes['tag-names']).toEqual(['only']);
    const cleared = await api(h, 'patch', `/workspaces/${id}`, acme.organizationToken, workspaceDocument({}, { tags: { data: [] } }));
    expect(cleared.body.data.attributes['tag-names']).toEqual([]);
  });

  it('refuses a creation or an update naming a bad tag, and stores nothing of it', async () => {
    const before = await tagState();
    const name = uniqueName('refused');
    const create = (attributes: Record<string, unknown>, relationships?: Record<string, unknown>) =>
      api(
        h,
        'post',
        `/organizations/${acme.organization}/workspaces`,
        acme.organizationToken,
        workspaceDocument({ name, ...attributes }, relationships),
      );
    expectError(await create({ 'tag-names': ['fine', 'not fine'] }), 422, '/data/attributes/tag-names/1');
    expectError(
      await create({ 'tag-names': ['fine'] }, { tags: { data: [{ type: 'tags', id: 'tag-doesnotexist0000' }] } }),
      422,
      '/data/relationships/tags/data/0/id',
    );
    expect((await api(h, 'get', `/organizations/${acme.organization}/workspaces/${name}`, acme.organizationToken)).status).toBe(404);
    expect(await tagState()).toBe(before);
    const taken = await create({ 'tag-names': ['fine'] });
    expect(taken.status).toBe(201);
    const afterCreate = await tagState();
    // A taken name rolls the tags of the request back with the workspace.
    expectError(await create({ 'tag-names': ['never-stored'] }), 422, '/data/attributes/name');
    expect(await tagState()).toBe(afterCreate);
    const id = taken.body.data.id as string;
    const patch = await api(
      h,
      'patch',
      `/workspaces/${id}`,
      acme.organizationToken,
      workspaceDocument({ description: 'no', 'tag-names': ['a b'] }),
    );
    expectError(patch, 422, '/data/attributes/tag-names/0');
    const shown = await api(h, 'get', `/workspaces/${id}`, acme.organizationToken);
    expect(shown.body.data.attributes).toMatchObject({ description: null, 'tag-names': ['fine'] });
  });

  it('answers a workspace deleted between the checks and the link with a 409, linking and creating nothing', async () => {
    const organizationId = (await h.orm.em.fork().findOneOrFail(Organization, { name: acme.organization })).id;
    const before = await tagState();
    const linking = linkTags(h.orm.em.fork(), organizationId, ['ws-deletedmeanwhile0'], { ids: [], names: ['orphan'] });
    await expect(linking).rejects.toMatchObject({ status: 409 });
    expect(await tagState()).toBe(before);
  });

  it('gives two concurrent requests naming the same new tag one tag', async () => {
    const workspaces = await Promise.all([newWorkspace(), newWorkspace(), newWorkspace(), newWorkspace()]);
    const results = await Promise.all(workspaces.map((workspaceId) => tag(workspaceId, byName('raced'))));
    expect(results.map((res) => res.status)).toEqual([204, 204, 204, 204]);
    const listed = await organizationTags(acme, '?q=raced');
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0].attributes['instance-count']).toBe(4);
  });
});
