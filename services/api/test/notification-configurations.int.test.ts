import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { api, createTeam, createTeamToken, createWorkspace, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { startNotificationReceiver, type NotificationReceiver } from '../../../test/support/notification-receiver.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';

/**
 * Notification configurations through the API: HCP's shapes, its validation (each a 422 with a
 * pointer, nothing saved), verification to a real receiver on loopback, the write-only token and the
 * 404 of every configuration the caller may not manage.
 */
describe('notification configurations', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let receiver: NotificationReceiver;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('notify'));
    other = await seedOrganization(h, uniqueName('notify-other'));
    receiver = await startNotificationReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await h.close();
  });

  const document = (attributes: Record<string, unknown>, relationships?: Record<string, unknown>) => ({
    data: { type: 'notification-configurations', attributes, ...(relationships ? { relationships } : {}) },
  });
  const generic = (extra: Record<string, unknown> = {}) =>
    document({
      name: 'hook',
      'destination-type': 'generic',
      enabled: false,
      url: 'http://example.com/hook',
      triggers: ['run:created'],
      ...extra,
    });
  const create = (workspaceId: string, body: unknown, token = acme.organizationToken) =>
    api(h, 'post', `/workspaces/${workspaceId}/notification-configurations`, token, body);
  const count = async (workspaceId: string): Promise<number> =>
    Number(
      (
        await h.orm.em
          .fork()
          .getConnection()
          .execute<{ count: string }[]>(`select count(*) from notification_configurations where workspace_id = ?`, [workspaceId])
      )[0]?.count,
    );

  it('creates a disabled generic configuration unverified, shows it in HCP shape, the token never', async () => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
    const created = await create(workspaceId, generic({ token: 'secret-token-1' }));
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      type: 'notification-configurations',
      attributes: {
        name: 'hook',
        'destination-type': 'generic',
        enabled: false,
        url: 'http://example.com/hook',
        token: null,
        triggers: ['run:created'],
        'email-addresses': [],
        'delivery-responses': [],
      },
      relationships: { subscribable: { data: { type: 'workspaces', id: workspaceId } }, users: { data: [] } },
    });
    expect(created.body.data.attributes['created-at']).toMatch(/Z$/);
    expect(created.text).not.toContain('secret-token-1');
    expect(receiver.received).toHaveLength(0);

    const shown = await api(h, 'get', `/notification-configurations/${created.body.data.id}`, acme.organizationToken);
    expect(shown.body.data).toEqual(created.body.data);
    // Unpaginated without page parameters (go-tfe expects no pagination then); paginated with them.
    const listed = await api(h, 'get', `/workspaces/${workspaceId}/notification-configurations`, acme.organizationToken);
    expect(listed.body).toEqual({ data: [created.body.data] });
    const paged = await api(
      h,
      'get',
      `/workspaces/${workspaceId}/notification-configurations?page[number]=999&page[size]=100`,
      acme.organizationToken,
    );
    expect(paged.body.data).toEqual([]);
    expect(paged.body.meta.pagination).toMatchObject({ 'current-page': 999, 'total-count': 1 });
    expect(listed.text + paged.text + shown.text).not.toContain('secret-token-1');
  });

  it('verifies an enabled generic configuration at creation: signed with the token, recorded in delivery-responses', async () => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
    const before = receiver.received.length;
    const created = await create(workspaceId, generic({ enabled: true, url: receiver.url, token: 'verify-key' }));
    expect(created.status).toBe(201);
    const request = receiver.received[before];
    expect(request?.body).toMatchObject({
      payload_version: 1,
      notification_configuration_id: created.body.data.id,
      run_id: null,
      workspace_name: null,
      notifications: [{ trigger: 'verification', message: 'Verification of hook', run_status: null }],
    });
    expect(request?.headers['x-tfe-notification-signature']).toBe(opensslHmac('verify-key', request?.raw ?? Buffer.alloc(0)));
    expect(created.body.data.attributes['delivery-responses']).toEqual([
      expect.objectContaining({ url: receiver.url, code: '200', successful: 'true', body: 'ok' }),
    ]);

    // The action sends it again at once and answers with the configuration.
    const verified = await api(h, 'post', `/notification-configurations/${created.body.data.id}/actions/verify`, acme.organizationToken);
    expect(verified.status).toBe(200);
    expect(receiver.received.length).toBe(before + 2);
    expect(verified.body.data.attributes['delivery-responses']).toHaveLength(2);
  });

  it('refuses to save an enabled webhook whose verification is not answered 2xx (400), and keeps the failed answer on verify', async () => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
    receiver.answer(500);
    try {
      const refused = await create(workspaceId, generic({ enabled: true, url: receiver.url }));
      expectError(refused, 400, '/data/attributes/url');
      expect(await count(workspaceId)).toBe(0);

      const saved = await create(workspaceId, generic({ url: receiver.url }));
      const id = saved.body.data.id as string;
      expectError(
        await api(h, 'post', `/notification-configurations/${id}/actions/verify`, acme.organizationToken),
        400,
        '/data/attributes/url',
      );
      const shown = await api(h, 'get', `/notification-configurations/${id}`, acme.organizationToken);
      expect(shown.body.data.attributes['delivery-responses']).toEqual([
        expect.objectContaining({ code: '500', successful: 'false', body: 'not now' }),
      ]);
    } finally {
      receiver.answer(200);
    }
  });

  it.each([
    ['a slack configuration without url', { 'destination-type': 'slack', url: undefined }, '/data/attributes/url'],
    ['an unknown trigger', { triggers: ['run:exploded'] }, '/data/attributes/triggers/0'],
    ['a repeated trigger', { triggers: ['run:created', 'run:created'] }, '/data/attributes/triggers'],
    ['an unknown destination type', { 'destination-type': 'pager' }, '/data/attributes/destination-type'],
    ['a non-http url', { url: 'ftp://example.com/' }, '/data/attributes/url'],
    ['email addresses on a webhook', { 'email-addresses': ['a@example.com'] }, '/data/attributes/email-addresses'],
    [
      'a malformed email address',
      { 'destination-type': 'email', url: undefined, 'email-addresses': ['nobody'] },
      '/data/attributes/email-addresses/0',
    ],
    ['an empty name', { name: '' }, '/data/attributes/name'],
  ])('refuses %s with a 422 at its pointer, saving nothing', async (_label, change, pointer) => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
    expectError(await create(workspaceId, generic(change)), 422, pointer);
    expect(await count(workspaceId)).toBe(0);
  });

  it('accepts email configurations with addresses; refuses users that do not exist', async () => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
    const email = document({
      name: 'mail',
      'destination-type': 'email',
      enabled: true,
      'email-addresses': ['ops@example.com'],
      triggers: ['run:errored'],
    });
    const created = await create(workspaceId, email);
    expect(created.status).toBe(201);
    expect(created.body.data.attributes['email-addresses']).toEqual(['ops@example.com']);
    const withUser = document({ name: 'mail', 'destination-type': 'email' }, { users: { data: [{ type: 'users', id: 'user-nobody' }] } });
    expectError(await create(workspaceId, withUser), 422, '/data/relationships/users/data/0/id');
  });

  it('allows 20 configurations per workspace; the 21st is a 422', async () => {
    const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('ws'));
    for (let index = 0; index < 20; index += 1) expect((await create(workspaceId, generic({ name: `n${index}` }))).status).toBe(201);
    expectError(await create(workspaceId, generic({ name: 'n20' })), 422, '/data');
    expect(await count(workspaceId)).toBe(20);
  });

  it('updates only what is sent (an empty PATCH is a 200) and deletes', async () => {
    const created = await create(acme.workspaceId, generic());
    const id = created.body.data.id as string;
    const empty = await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
      data: { type: 'notification-configurations', id },
    });
    expect(empty.status).toBe(200);
    expect(empty.body.data.attributes).toEqual(created.body.data.attributes);
    const renamed = await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
      data: { type: 'notification-configurations', attributes: { name: 'renamed', triggers: ['run:errored', 'run:needs_attention'] } },
    });
    expect(renamed.body.data.attributes).toMatchObject({
      name: 'renamed',
      triggers: ['run:errored', 'run:needs_attention'],
      url: 'http://example.com/hook',
    });
    expectError(
      await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
        data: { type: 'notification-configurations', attributes: { url: null } },
      }),
      422,
      '/data/attributes/url',
    );
    expect((await api(h, 'delete', `/notification-configurations/${id}`, acme.organizationToken)).status).toBe(204);
    expectNotFound(await api(h, 'get', `/notification-configurations/${id}`, acme.organizationToken));
  });

  it('hides configurations from other organizations and from teams that do not manage workspaces (404)', async () => {
    const created = await create(acme.workspaceId, generic());
    const id = created.body.data.id as string;
    const reader = await createTeamToken(
      h,
      acme.organizationToken,
      await createTeam(h, acme.organization, acme.organizationToken, uniqueName('readers')),
    );
    for (const token of [other.organizationToken, reader]) {
      expectNotFound(await api(h, 'get', `/notification-configurations/${id}`, token));
      expectNotFound(await api(h, 'patch', `/notification-configurations/${id}`, token, generic()));
      expectNotFound(await api(h, 'delete', `/notification-configurations/${id}`, token));
      expectNotFound(await api(h, 'post', `/notification-configurations/${id}/actions/verify`, token));
      expectNotFound(await api(h, 'get', `/workspaces/${acme.workspaceId}/notification-configurations`, token));
      expectNotFound(await create(acme.workspaceId, generic(), token));
    }
    expectNotFound(await api(h, 'get', `/notification-configurations/nonexisting`, acme.organizationToken));
    const manager = await createTeamToken(
      h,
      acme.organizationToken,
      await createTeam(h, acme.organization, acme.organizationToken, uniqueName('managers'), { 'manage-workspaces': true }),
    );
    expect((await api(h, 'get', `/notification-configurations/${id}`, manager)).status).toBe(200);
  });
});
