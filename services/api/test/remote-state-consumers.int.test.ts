import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  api,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, idsOf, uniqueName } from '../../../test/support/assertions.ts';

/**
 * A workspace's remote state consumers: listed, added, removed and replaced through
 * /workspaces/:id/relationships/remote-state-consumers; every refusal changes nothing.
 */
describe('remote state consumers', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let managerToken: string;
  let readerToken: string;
  let readerTeam: string;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('rsc'));
    other = await seedOrganization(h, uniqueName('rsc-other'));
    managerToken = await createTeamToken(
      h,
      acme.organizationToken,
      await createTeam(h, acme.organization, acme.organizationToken, 'managers', { 'manage-workspaces': true }),
    );
    readerTeam = await createTeam(h, acme.organization, acme.organizationToken, 'readers');
    readerToken = await createTeamToken(h, acme.organizationToken, readerTeam);
  });
  afterAll(async () => {
    await h.close();
  });

  const path = (id: string) => `/workspaces/${id}/relationships/remote-state-consumers`;
  const document = (...ids: string[]) => ({ data: ids.map((id) => ({ type: 'workspaces', id })) });
  const workspace = (label: string) => createWorkspace(h, acme.organization, acme.organizationToken, uniqueName(label));
  /** The stored links of `id`, straight from the table. */
  const stored = async (id: string): Promise<string[]> =>
    (
      await h.orm.em
        .fork()
        .getConnection()
        .execute<{ consumer_id: string }[]>(
          `select consumer_id from workspace_remote_state_consumers where workspace_id = ? order by consumer_id`,
          [id],
        )
    ).map((row) => row.consumer_id);
  const sorted = (ids: string[]) => [...ids].sort();
  const change = (method: 'post' | 'patch' | 'delete', id: string, body: unknown, token = acme.organizationToken) =>
    api(h, method, path(id), token, body);

  it('adds consumers (204, idempotent) and lists them as the workspace documents a show returns', async () => {
    const subject = await workspace('subject');
    const [first, second] = [await workspace('b-consumer'), await workspace('a-consumer')];
    const added = await change('post', subject, document(first, second));
    expect([added.status, added.text]).toEqual([204, '']);
    // Again, with one already there and one twice: nothing doubles.
    expect((await change('post', subject, document(second, second, first))).status).toBe(204);
    expect(await stored(subject)).toEqual(sorted([first, second]));

    const listed = await api(h, 'get', path(subject), acme.organizationToken);
    expect(listed.status).toBe(200);
    expect(listed.headers['content-type']).toContain(JSON_API);
    // By name: a-consumer (second) before b-consumer (first).
    expect(idsOf(listed)).toEqual([second, first]);
    const shown = await api(h, 'get', `/workspaces/${second}`, acme.organizationToken);
    expect(listed.body.data[0]).toEqual(shown.body.data);
    expect(listed.body.meta.pagination).toMatchObject({ 'current-page': 1, 'total-count': 2, 'total-pages': 1 });

    const paged = await api(h, 'get', `${path(subject)}?page[size]=1&page[number]=2`, acme.organizationToken);
    expect(idsOf(paged)).toEqual([first]);
    expect(paged.body.meta.pagination).toMatchObject({ 'current-page': 2, 'total-count': 2, 'prev-page': 1, 'next-page': null });
    expect(paged.body.links.self).toContain('/relationships/remote-state-consumers?');
  });

  it('removes consumers (204); absent ones and the workspace itself are ignored', async () => {
    const subject = await workspace('subject');
    const [kept, removed, never] = [await workspace('kept'), await workspace('removed'), await workspace('never')];
    expect((await change('post', subject, document(kept, removed))).status).toBe(204);
    const res = await change('delete', subject, document(removed, never, subject));
    expect([res.status, res.text]).toEqual([204, '']);
    expect(await stored(subject)).toEqual([kept]);
    expect(idsOf(await api(h, 'get', path(subject), acme.organizationToken))).toEqual([kept]);
  });

  it('replaces the whole set (204)', async () => {
    const subject = await workspace('subject');
    const [dropped, both, fresh] = [await workspace('dropped'), await workspace('both'), await workspace('fresh')];
    expect((await change('post', subject, document(dropped, both))).status).toBe(204);
    expect((await change('patch', subject, document(both, fresh))).status).toBe(204);
    expect(await stored(subject)).toEqual(sorted([both, fresh]));
  });

  it('refuses bad documents with 422 at the field, changing nothing', async () => {
    const subject = await workspace('subject');
    const consumer = await workspace('consumer');
    expect((await change('post', subject, document(consumer))).status).toBe(204);
    const cases: [unknown, string][] = [
      [{ data: [] }, '/data'],
      [{}, '/data'],
      [{ data: { type: 'workspaces', id: consumer } }, '/data'],
      [
        {
          data: [
            { type: 'workspaces', id: consumer },
            { type: 'teams', id: consumer },
          ],
        },
        '/data/1/type',
      ],
      [{ data: [{ type: 'workspaces' }] }, '/data/0/id'],
      [{ data: [{ type: 'workspaces', id: '' }] }, '/data/0/id'],
      [{ data: [{ type: 'workspaces', id: 'x'.repeat(65) }] }, '/data/0/id'],
      [{ data: [{ type: 'workspaces', id: 'ws-a\u0000b' }] }, '/data/0/id'],
      [{ data: ['ws-abc'] }, '/data/0'],
    ];
    for (const method of ['post', 'patch', 'delete'] as const) {
      for (const [body, pointer] of cases) expectError(await change(method, subject, body), 422, pointer);
    }
    // A DELETE with no body at all names nothing to remove.
    expectError(await api(h, 'delete', path(subject), acme.organizationToken), 422, '/data');
    const malformed = await h.http
      .post(`/api/v2${path(subject)}`)
      .set('Authorization', `Bearer ${acme.organizationToken}`)
      .set('Content-Type', JSON_API)
      .send('{"data": [');
    expectError(malformed, 400);
    expect(await stored(subject)).toEqual([consumer]);
  });

  it("refuses unknown workspaces, another organization's and the workspace itself with 422 at the id, changing nothing", async () => {
    const subject = await workspace('subject');
    const [consumer, extra] = [await workspace('consumer'), await workspace('extra')];
    expect((await change('post', subject, document(consumer))).status).toBe(204);
    for (const method of ['post', 'patch', 'delete'] as const) {
      const unknown = expectError(await change(method, subject, document(extra, 'ws-doesnotexist00000')), 422, '/data/1/id');
      const foreign = expectError(await change(method, subject, document(other.workspaceId)), 422, '/data/0/id');
      // Another organization's workspace reads exactly like one that does not exist.
      expect(foreign.detail).toBe(unknown.detail?.replace('ws-doesnotexist00000', other.workspaceId));
    }
    for (const method of ['post', 'patch'] as const) {
      const itself = expectError(await change(method, subject, document(extra, subject)), 422, '/data/1/id');
      expect(itself.detail).toContain('cannot be a remote state consumer of itself');
    }
    expect(await stored(subject)).toEqual([consumer]);
    expect(await stored(other.workspaceId)).toEqual([]);
  });

  it('while global-remote-state is true: lists every other workspace, refuses changes with 422 and keeps the stored list', async () => {
    const organization = await seedOrganization(h, uniqueName('rsc-global'));
    const token = organization.organizationToken;
    const subject = organization.workspaceId;
    const consumer = await createWorkspace(h, organization.organization, token, 'z-consumer');
    const bystander = await createWorkspace(h, organization.organization, token, 'a-bystander');
    expect((await change('post', subject, document(consumer), token)).status).toBe(204);
    const global = await api(h, 'patch', `/workspaces/${subject}`, token, {
      data: { type: 'workspaces', attributes: { 'global-remote-state': true } },
    });
    expect(global.status).toBe(200);
    expect(idsOf(await api(h, 'get', path(subject), token))).toEqual([bystander, consumer]);
    for (const method of ['post', 'patch', 'delete'] as const) {
      const refused = expectError(await change(method, subject, document(bystander), token), 422);
      expect(refused.detail).toContain('global-remote-state is false');
    }
    expect(await stored(subject)).toEqual([consumer]);
    await api(h, 'patch', `/workspaces/${subject}`, token, { data: { type: 'workspaces', attributes: { 'global-remote-state': false } } });
    expect(idsOf(await api(h, 'get', path(subject), token))).toEqual([consumer]);
  });

  it('reads with read access (only the consumers the caller may read); changes with the workspace update rules', async () => {
    const subject = await workspace('subject');
    const [visible, hidden] = [await workspace('visible'), await workspace('hidden')];
    await grantWorkspace(h, acme.organizationToken, readerTeam, subject, { access: 'read' });
    await grantWorkspace(h, acme.organizationToken, readerTeam, visible, { access: 'read' });
    // A team with "manage workspaces" changes them, as it updates settings.
    expect((await change('post', subject, document(visible, hidden), managerToken)).status).toBe(204);

    const asReader = await api(h, 'get', path(subject), readerToken);
    expect(asReader.status).toBe(200);
    expect(idsOf(asReader)).toEqual([visible]);
    expect(asReader.body.meta.pagination['total-count']).toBe(1);
    // Read access is not enough to change them: answered like a missing workspace.
    for (const method of ['post', 'patch', 'delete'] as const)
      expectNotFound(await change(method, subject, document(visible), readerToken));
    // Nor to read those of a workspace the team cannot see.
    expectNotFound(await api(h, 'get', path(hidden), readerToken));
    expect(await stored(subject)).toEqual(sorted([visible, hidden]));
  });

  it("answers an unknown workspace and another organization's like a missing resource, changing nothing", async () => {
    const subject = await workspace('subject');
    const consumer = await workspace('consumer');
    expectNotFound(await api(h, 'get', path('ws-doesnotexist00000'), acme.organizationToken));
    expectNotFound(await api(h, 'get', path(subject), other.organizationToken));
    for (const method of ['post', 'patch', 'delete'] as const) {
      expectNotFound(await change(method, 'ws-doesnotexist00000', document(consumer)));
      expectNotFound(await change(method, subject, document(other.workspaceId), other.organizationToken));
      // The missing workspace is the answer even when the body is wrong too.
      expectNotFound(await change(method, 'ws-doesnotexist00000', { data: [] }));
    }
    expect(await stored(subject)).toEqual([]);
  });

  it('removes the links when either workspace is deleted', async () => {
    const subject = await workspace('subject');
    const [doomed, survivor] = [await workspace('doomed'), await workspace('survivor')];
    expect((await change('post', subject, document(doomed, survivor))).status).toBe(204);
    expect((await change('post', survivor, document(subject))).status).toBe(204);
    expect((await api(h, 'delete', `/workspaces/${doomed}`, acme.organizationToken)).status).toBe(204);
    expect(await stored(subject)).toEqual([survivor]);
    expect((await api(h, 'delete', `/workspaces/${subject}`, acme.organizationToken)).status).toBe(204);
    expect(await stored(subject)).toEqual([]);
    expect(await stored(survivor)).toEqual([]);
  });
});
