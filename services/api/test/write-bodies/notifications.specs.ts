import { MAX_NOTIFICATION_CONFIGURATIONS } from '@runtasks/shared/domain';
import { api, createTeam, createTeamToken } from '../../../../test/support/fixtures.ts';
import { uniqueName } from '../../../../test/support/assertions.ts';
import { bool, list, literal, object, oneOf, resourceFields, str, type Request, type WriteSpec } from './model.ts';
import { describeResponse } from './hostile.ts';
import { type Fixtures } from './fixtures.ts';
import { taskServerUrl } from './wrong-values.ts';

/**
 * WriteSpecs: notification configurations of a workspace and of a team, their update and their
 * verification. Webhooks point at the harness's task server, which answers 200 to anything but /fail…,
 * so an enabled configuration passes the verification HCP makes before saving it.
 */
export async function addNotificationSpecs(SPECS: Record<string, WriteSpec>, f: Fixtures): Promise<void> {
  const { admin, h, main, workspace } = f;
  const TYPE = 'notification-configurations';
  const readTeam = await createTeam(h, main, admin, 'team-notify-read');
  const readToken = await createTeamToken(h, admin, readTeam);

  const created = async (path: string, attributes: Record<string, unknown>): Promise<string> => {
    const res = await api(h, 'post', path, admin, { data: { type: TYPE, attributes } });
    if (res.status !== 201) throw new Error(`POST ${path}: ${describeResponse(res)}`);
    return res.body.data.id as string;
  };
  const webhook = (name: string, triggers: string[]) => ({
    name,
    'destination-type': 'generic',
    enabled: false,
    url: `${taskServerUrl}/notify`,
    triggers,
  });

  // -- creating, on a workspace and on a team: every attribute, the users and the subscribable named.
  const createFields = (subscribable: 'workspaces' | 'teams') =>
    resourceFields(
      TYPE,
      {
        name: str('text', 255, { nonEmpty: true }),
        'destination-type': oneOf(['generic', 'slack', 'microsoft-teams', 'email']),
        enabled: bool,
        url: str('url', 2048, { nullable: true }),
        token: str('text', 1024, { nullable: true, nonEmpty: false }),
        triggers: list(),
        'email-addresses': list(),
      },
      {
        users: object(),
        'users/data': list(),
        subscribable: object(),
        'subscribable/data': object(),
        'subscribable/data/type': literal(subscribable),
        'subscribable/data/id': str('id', 64),
      },
    );
  const createDocument = (subscribable: 'workspaces' | 'teams', id: string, attributes: Record<string, unknown>) => ({
    data: {
      type: TYPE,
      attributes,
      relationships: { users: { data: [] }, subscribable: { data: { type: subscribable, id } } },
    },
  });
  const everyAttribute = (name: string, triggers: string[]) => ({
    ...webhook(name, triggers),
    enabled: true,
    token: 'notification-signing-token',
    'email-addresses': [],
  });
  const createSpec = (
    subscribable: 'workspaces' | 'teams',
    triggers: string[],
    owners: { base: string; fresh: () => Promise<string>; full: string; other: string },
  ): WriteSpec => {
    const request = (id: string, attributes: Record<string, unknown>, token?: string): Request => ({
      path: `/${subscribable}/${id}/notification-configurations`,
      body: createDocument(subscribable, id, attributes),
      ...(token ? { token } : {}),
    });
    return {
      attributes: '/data/attributes',
      fields: createFields(subscribable),
      required: ['/data', '/data/type', '/data/attributes', '/data/attributes/name', '/data/attributes/destination-type'],
      success: 201,
      base: async () => request(owners.base, everyAttribute('notify-base', triggers)),
      // A new owner each time: at most 20 configurations each.
      fresh: async () => request(await owners.fresh(), everyAttribute(uniqueName('notify'), triggers)),
      failures: [
        // An enabled webhook that does not answer its verification is not saved.
        async () => request(owners.base, { ...everyAttribute('notify-fail', triggers), url: `${taskServerUrl}/fail` }),
        // The 21st configuration.
        async () => request(owners.full, everyAttribute('notify-one-too-many', triggers)),
        // A subscribable in the body that is not the path's.
        async () => ({
          ...request(owners.base, everyAttribute('notify-elsewhere', triggers)),
          body: createDocument(subscribable, owners.other, everyAttribute('notify-elsewhere', triggers)),
        }),
        // An email configuration naming a user who is nobody here.
        async () => ({
          ...request(owners.base, {}),
          body: {
            data: {
              type: TYPE,
              attributes: { name: 'notify-email', 'destination-type': 'email', enabled: false, triggers },
              relationships: { users: { data: [{ type: 'users', id: 'user-doesnotexist0000' }] } },
            },
          },
        }),
        // A token without admin access to the owner: the 404 of one that does not exist.
        async () => request(owners.base, everyAttribute('notify-read-only', triggers), readToken),
      ],
      // A subscribable that is well formed but another is refused at the relationship as a whole.
      reportedAt: (pointer) =>
        pointer === '/data/relationships/subscribable/data/id' || pointer === '/data/relationships/subscribable/data/type'
          ? '/data/relationships/subscribable/data'
          : pointer,
    };
  };

  const full = async (path: string, triggers: string[]): Promise<void> => {
    for (let index = 0; index < MAX_NOTIFICATION_CONFIGURATIONS; index++) await created(path, webhook(`notify-full-${index}`, triggers));
  };
  const wsNotify = await workspace('ws-notify');
  const wsNotifyFull = await workspace('ws-notify-full');
  await full(`/workspaces/${wsNotifyFull}/notification-configurations`, ['run:needs_attention']);
  SPECS['POST /workspaces/:workspace_id/notification-configurations'] = createSpec('workspaces', ['run:needs_attention', 'run:errored'], {
    base: wsNotify,
    fresh: () => workspace(uniqueName('ws-notify')),
    full: wsNotifyFull,
    other: wsNotifyFull,
  });

  const teamNotify = await createTeam(h, main, admin, 'team-notify');
  const teamNotifyFull = await createTeam(h, main, admin, 'team-notify-full');
  await full(`/teams/${teamNotifyFull}/notification-configurations`, ['change_request:created']);
  SPECS['POST /teams/:team_id/notification-configurations'] = createSpec('teams', ['change_request:created'], {
    base: teamNotify,
    fresh: () => createTeam(h, main, admin, uniqueName('team-notify')),
    full: teamNotifyFull,
    other: teamNotifyFull,
  });

  // -- updating: every attribute but the destination type, which never changes.
  const patched = await created(`/workspaces/${wsNotify}/notification-configurations`, webhook('notify-patched', ['run:created']));
  const failing = await created(`/workspaces/${wsNotify}/notification-configurations`, {
    ...webhook('notify-failing', ['run:created']),
    url: `${taskServerUrl}/fail`,
  });
  const update = (id: string, attributes: Record<string, unknown>, token?: string): Request => ({
    path: `/notification-configurations/${id}`,
    body: { data: { type: TYPE, attributes, relationships: { users: { data: [] } } } },
    ...(token ? { token } : {}),
  });
  SPECS['PATCH /notification-configurations/:configuration_id'] = {
    attributes: '/data/attributes',
    fields: resourceFields(
      TYPE,
      {
        name: str('text', 255, { nonEmpty: true }),
        enabled: bool,
        url: str('url', 2048, { nullable: true }),
        token: str('text', 1024, { nullable: true, nonEmpty: false }),
        triggers: list(),
        'email-addresses': list(),
      },
      { users: object(), 'users/data': list() },
    ),
    // Without `data` the body is empty, which an update allows (it changes nothing).
    required: ['/data/type'],
    success: 200,
    base: async () => update(patched, { ...everyAttribute('notify-patched', ['run:created']), enabled: false }),
    fresh: async () => update(patched, { name: 'notify-patched', enabled: false, triggers: ['run:completed'] }),
    failures: [
      // Enabling a webhook verifies it first; one that does not answer stays as it was.
      async () => update(failing, { enabled: true }),
      // A webhook needs its URL.
      async () => update(patched, { url: null }),
      // A workspace's configuration takes no team trigger.
      async () => update(patched, { triggers: ['change_request:created'] }),
      async () => update('nc-doesnotexist000000', { name: 'nobody' }),
      async () => update(patched, { name: 'read-only' }, readToken),
    ],
  };

  // -- verifying: no body (or `{}`); a webhook that answers 2xx is verified, and its answer kept.
  const verify = (id: string, token?: string): Request => ({
    path: `/notification-configurations/${id}/actions/verify`,
    body: {},
    ...(token ? { token } : {}),
  });
  SPECS['POST /notification-configurations/:configuration_id/actions/verify'] = {
    attributes: '',
    fields: {},
    required: [],
    success: 200,
    base: async () => verify(patched),
    fresh: async () => verify(patched),
    // Not the failing destination: its answer is recorded (a change a refusal must not make elsewhere).
    failures: [async () => verify('nc-doesnotexist000000'), async () => verify(patched, readToken)],
  };
}
