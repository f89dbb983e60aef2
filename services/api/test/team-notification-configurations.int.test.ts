import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { api, createTeam, createTeamToken, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, idsOf, uniqueName } from '../../../test/support/assertions.ts';
import { startNotificationReceiver, type NotificationReceiver } from '../../../test/support/notification-receiver.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';

/**
 * Team notification configurations (HCP's beta, go-tfe v1.90.0's `_forTeams` tests): the requests those
 * tests make, in the shapes go-tfe sends (the `subscribable` relationship of type `teams`), HCP's team
 * triggers, each refusal a 422 with a pointer and nothing saved, and the 404 of every team the caller
 * may not manage.
 */
describe('team notification configurations', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let receiver: NotificationReceiver;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, uniqueName('team-notify'));
    other = await seedOrganization(h, uniqueName('team-notify-other'));
    receiver = await startNotificationReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await h.close();
  });

  /** What go-tfe's Create sends for a team: the attributes and the subscribable team. */
  const document = (teamId: string, attributes: Record<string, unknown>, relationships: Record<string, unknown> = {}) => ({
    data: {
      type: 'notification-configurations',
      attributes,
      relationships: { subscribable: { data: { type: 'teams', id: teamId } }, ...relationships },
    },
  });
  const generic = (teamId: string, extra: Record<string, unknown> = {}) =>
    document(teamId, {
      name: uniqueName('hook'),
      'destination-type': 'generic',
      enabled: false,
      token: 'team-token-1',
      url: 'http://example.com',
      triggers: ['change_request:created'],
      ...extra,
    });
  const create = (teamId: string, body: unknown, token = acme.organizationToken) =>
    api(h, 'post', `/teams/${teamId}/notification-configurations`, token, body);
  const newTeam = () => createTeam(h, acme.organization, acme.organizationToken, uniqueName('team'));
  const count = async (teamId: string): Promise<number> =>
    Number(
      (
        await h.orm.em
          .fork()
          .getConnection()
          .execute<{ count: string }[]>(`select count(*) from notification_configurations where team_id = ?`, [teamId])
      )[0]?.count,
    );
  /** A person in the organization (an invitation makes the user and the membership). */
  const member = async (): Promise<string> => {
    const invited = await api(h, 'post', `/organizations/${acme.organization}/organization-memberships`, acme.organizationToken, {
      data: { type: 'organization-memberships', attributes: { email: `${uniqueName('person')}@example.test` } },
    });
    expect(invited.status).toBe(201);
    return invited.body.data.relationships.user.data.id as string;
  };

  it('creates and lists a team’s configurations with subscribable of type teams (List_forTeams, Create_forTeams)', async () => {
    const teamId = await newTeam();
    const first = await create(teamId, generic(teamId));
    const second = await create(teamId, generic(teamId));
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(first.body.data).toMatchObject({
      type: 'notification-configurations',
      attributes: {
        'destination-type': 'generic',
        enabled: false,
        url: 'http://example.com',
        token: null,
        triggers: ['change_request:created'],
        'delivery-responses': [],
      },
      relationships: { subscribable: { data: { type: 'teams', id: teamId } }, users: { data: [] } },
    });
    expect(first.text).not.toContain('team-token-1');

    const listed = await api(h, 'get', `/teams/${teamId}/notification-configurations`, acme.organizationToken);
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ data: [first.body.data, second.body.data] });
    const paged = await api(
      h,
      'get',
      `/teams/${teamId}/notification-configurations?page[number]=999&page[size]=100`,
      acme.organizationToken,
    );
    expect(paged.body.data).toEqual([]);
    expect(paged.body.meta.pagination).toMatchObject({ 'current-page': 999, 'total-count': 2 });

    // The workspace's list holds none of them, and a team's list none of the workspace's.
    const workspaceList = await api(h, 'get', `/workspaces/${acme.workspaceId}/notification-configurations`, acme.organizationToken);
    expect(idsOf(workspaceList)).not.toContain(first.body.data.id);
    // A body without the relationship (older clients) is the path's team too.
    const bare = await create(teamId, { data: { type: 'notification-configurations', attributes: generic(teamId).data.attributes } });
    expect(bare.status).toBe(201);
    expect(bare.body.data.relationships.subscribable.data).toEqual({ type: 'teams', id: teamId });
    expectNotFound(await api(h, 'get', `/teams/team-nonexisting/notification-configurations`, acme.organizationToken));
  });

  it('refuses what HCP refuses, each a 422 with a pointer, nothing saved', async () => {
    const teamId = await newTeam();
    const cases: [Record<string, unknown>, string][] = [
      [{ url: null }, '/data/attributes/url'],
      [{ 'destination-type': 'slack', url: undefined }, '/data/attributes/url'],
      [{ 'destination-type': 'microsoft-teams', url: undefined }, '/data/attributes/url'],
      [{ triggers: ['the beacons of gondor are lit'] }, '/data/attributes/triggers/0'],
      // A team takes change requests only; run triggers are a workspace's.
      [{ triggers: ['change_request:created', 'run:created'] }, '/data/attributes/triggers/1'],
      [{ name: '' }, '/data/attributes/name'],
      [{ 'destination-type': 'pager' }, '/data/attributes/destination-type'],
    ];
    for (const [extra, pointer] of cases) expectError(await create(teamId, generic(teamId, extra)), 422, pointer);
    // The subscribable named in the body must be the path's team.
    const otherTeam = await newTeam();
    expectError(await create(teamId, generic(otherTeam)), 422, '/data/relationships/subscribable/data');
    const asWorkspace = generic(teamId);
    asWorkspace.data.relationships.subscribable = { data: { type: 'workspaces', id: acme.workspaceId } };
    expectError(await create(teamId, asWorkspace), 422, '/data/relationships/subscribable/data');
    expect(await count(teamId)).toBe(0);

    // And a workspace's configuration does not take the team trigger.
    expectError(
      await api(h, 'post', `/workspaces/${acme.workspaceId}/notification-configurations`, acme.organizationToken, {
        data: {
          type: 'notification-configurations',
          attributes: { name: 'ws', 'destination-type': 'generic', url: 'http://example.com', triggers: ['change_request:created'] },
        },
      }),
      422,
      '/data/attributes/triggers/0',
    );

    // 20 per team; the 21st is a 422 at /data.
    for (let index = 0; index < 20; index += 1) expect((await create(teamId, generic(teamId))).status).toBe(201);
    expectError(await create(teamId, generic(teamId)), 422, '/data');
    expect(await count(teamId)).toBe(20);
  });

  it('takes email configurations with and without users of the organization', async () => {
    const teamId = await newTeam();
    const userId = await member();
    const withUsers = await create(
      teamId,
      document(teamId, { name: 'mail', 'destination-type': 'email', enabled: false }, { users: { data: [{ type: 'users', id: userId }] } }),
    );
    expect(withUsers.status).toBe(201);
    expect(withUsers.body.data.relationships.users.data).toEqual([{ type: 'users', id: userId }]);
    const without = await create(teamId, document(teamId, { name: 'mail-2', 'destination-type': 'email', enabled: false }));
    expect(without.status).toBe(201);
    expectError(
      await create(
        teamId,
        document(
          teamId,
          { name: 'x', 'destination-type': 'email', enabled: false },
          { users: { data: [{ type: 'users', id: 'user-nobody' }] } },
        ),
      ),
      422,
      '/data/relationships/users/data/0/id',
    );
  });

  it('reads, updates (enabling verifies), verifies and deletes (Read/Update/Verify/Delete_forTeams)', async () => {
    const teamId = await newTeam();
    const created = await create(teamId, generic(teamId, { url: receiver.url, token: 'team-verify-key' }));
    const id = created.body.data.id as string;
    const shown = await api(h, 'get', `/notification-configurations/${id}`, acme.organizationToken);
    expect(shown.status).toBe(200);
    expect(shown.body.data).toEqual(created.body.data);
    expectNotFound(await api(h, 'get', `/notification-configurations/nonexisting`, acme.organizationToken));

    // Enabling a webhook sends HCP's verification first, signed with the token.
    const before = receiver.received.length;
    const enabled = await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
      data: { type: 'notification-configurations', attributes: { enabled: true, name: 'newName' } },
    });
    expect(enabled.status).toBe(200);
    expect(enabled.body.data.attributes).toMatchObject({ enabled: true, name: 'newName', triggers: ['change_request:created'] });
    expect(enabled.body.data.relationships.subscribable.data).toEqual({ type: 'teams', id: teamId });
    const request = receiver.received[before];
    expect(request?.body).toMatchObject({
      notification_configuration_id: id,
      notifications: [{ trigger: 'verification', message: 'Verification of newName' }],
    });
    expect(request?.headers['x-tfe-notification-signature']).toBe(opensslHmac('team-verify-key', request?.raw ?? Buffer.alloc(0)));
    expectError(
      await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
        data: { type: 'notification-configurations', attributes: { triggers: ['fly you fools!'] } },
      }),
      422,
      '/data/attributes/triggers/0',
    );
    expectError(
      await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
        data: { type: 'notification-configurations', attributes: { triggers: ['run:errored'] } },
      }),
      422,
      '/data/attributes/triggers/0',
    );
    // Without options: a 200 that changes nothing.
    const empty = await api(h, 'patch', `/notification-configurations/${id}`, acme.organizationToken, {
      data: { type: 'notification-configurations' },
    });
    expect(empty.status).toBe(200);
    expect(empty.body.data.attributes.triggers).toEqual(['change_request:created']);
    expectNotFound(
      await api(h, 'patch', `/notification-configurations/nonexisting`, acme.organizationToken, {
        data: { type: 'notification-configurations' },
      }),
    );

    const verified = await api(h, 'post', `/notification-configurations/${id}/actions/verify`, acme.organizationToken);
    expect(verified.status).toBe(200);
    expect(receiver.received.length).toBe(before + 2);
    expect(verified.body.data.attributes['delivery-responses'][0]).toMatchObject({ url: receiver.url, code: '200', successful: 'true' });
    expectNotFound(await api(h, 'post', `/notification-configurations/nonexisting/actions/verify`, acme.organizationToken));

    // Email users on a team's email configuration: set, then cleared when left out (as for workspaces).
    const [first, second] = [await member(), await member()];
    const mail = await create(
      teamId,
      document(teamId, { name: 'mail', 'destination-type': 'email', enabled: false }, { users: { data: [{ type: 'users', id: first }] } }),
    );
    const mailId = mail.body.data.id as string;
    const both = await api(h, 'patch', `/notification-configurations/${mailId}`, acme.organizationToken, {
      data: {
        type: 'notification-configurations',
        attributes: { enabled: true, name: 'newName' },
        relationships: {
          users: {
            data: [
              { type: 'users', id: first },
              { type: 'users', id: second },
            ],
          },
        },
      },
    });
    expect(both.status).toBe(200);
    expect(both.body.data.relationships.users.data).toEqual([
      { type: 'users', id: first },
      { type: 'users', id: second },
    ]);
    const cleared = await api(h, 'patch', `/notification-configurations/${mailId}`, acme.organizationToken, {
      data: { type: 'notification-configurations', attributes: { enabled: true, name: 'newName' } },
    });
    expect(cleared.body.data.relationships.users.data).toEqual([]);

    expect((await api(h, 'delete', `/notification-configurations/${id}`, acme.organizationToken)).status).toBe(204);
    expectNotFound(await api(h, 'get', `/notification-configurations/${id}`, acme.organizationToken));
    expectNotFound(await api(h, 'delete', `/notification-configurations/nonexisting`, acme.organizationToken));
  });

  it("hides a team's configurations from whoever may not manage the team (404 for every verb); the site admin may", async () => {
    const teamId = await newTeam();
    const created = await create(teamId, generic(teamId));
    const id = created.body.data.id as string;
    // A team that manages workspaces administers every workspace, not the organization's teams.
    const workspaceManager = await createTeamToken(
      h,
      acme.organizationToken,
      await createTeam(h, acme.organization, acme.organizationToken, uniqueName('managers'), { 'manage-workspaces': true }),
    );
    // Even the team's own token does not manage the team.
    const ownToken = await createTeamToken(h, acme.organizationToken, teamId);
    for (const token of [other.organizationToken, workspaceManager, ownToken]) {
      expectNotFound(await api(h, 'get', `/teams/${teamId}/notification-configurations`, token));
      expectNotFound(await create(teamId, generic(teamId), token));
      expectNotFound(await api(h, 'get', `/notification-configurations/${id}`, token));
      expectNotFound(await api(h, 'patch', `/notification-configurations/${id}`, token, { data: { type: 'notification-configurations' } }));
      expectNotFound(await api(h, 'post', `/notification-configurations/${id}/actions/verify`, token));
      expectNotFound(await api(h, 'delete', `/notification-configurations/${id}`, token));
    }
    expect(await count(teamId)).toBe(1);
    // The workspace manager still manages the workspace's own configurations.
    const workspaceConfiguration = await api(h, 'post', `/workspaces/${acme.workspaceId}/notification-configurations`, workspaceManager, {
      data: { type: 'notification-configurations', attributes: { name: 'ws', 'destination-type': 'generic', url: 'http://example.com' } },
    });
    expect(workspaceConfiguration.status).toBe(201);
    expect((await api(h, 'get', `/notification-configurations/${workspaceConfiguration.body.data.id}`, workspaceManager)).status).toBe(200);

    expect((await api(h, 'get', `/notification-configurations/${id}`, h.adminToken)).status).toBe(200);
    expect(idsOf(await api(h, 'get', `/teams/${teamId}/notification-configurations`, h.adminToken))).toEqual([id]);

    // Deleting the team deletes its configurations.
    expect((await api(h, 'delete', `/teams/${teamId}`, acme.organizationToken)).status).toBe(204);
    expect(await count(teamId)).toBe(0);
  });
});
