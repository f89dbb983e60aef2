import type { FilterQuery } from '@mikro-orm/core';
import { NotificationConfiguration, type Team, type Workspace } from '@runtasks/shared/db';
import {
  configurationProblem,
  NOTIFICATION_DESTINATION_TYPES,
  NOTIFICATION_TRIGGERS,
  newId,
  type NotificationDestinationType,
} from '@runtasks/shared/domain';
import { invalidAttribute } from '@runtasks/shared/errors';
import { deliveryResponsesOf } from '@runtasks/shared/notifications';
import { z } from 'zod';
import { poolOf, type ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeNotificationConfiguration } from '../serializers/notification-configuration.serializer.ts';
import {
  assertRoomForAnother,
  checkEmailUsers,
  findConfiguration,
  findManagedTeam,
  organizationOf,
  subscribableOf,
  verifyConfiguration,
  type Subscribable,
} from '../services/notification-configuration.service.ts';
import { findWorkspace } from '../services/workspace.service.ts';
import { publicRequestUrl, respond, type RouteDef } from './define.ts';
import { distinctList, flexibleBoolean, identifier, safeText, taskUrl } from './schemas.ts';

/**
 * Notification configurations, as HCP Terraform has them (docs/notifications.md). Rules live in
 * services/notification-configuration.service.ts and the domain's configurationProblem.
 */

// go-tfe sends the plural type; HCP's docs show the singular: both are accepted.
const TYPE = z.enum(['notification-configurations', 'notification-configuration'], {
  error: 'must be "notification-configurations"',
});
const emailAddress = safeText(254).pipe(z.email('must be an email address'));
const common = {
  name: safeText(255).min(1, 'must not be empty'),
  enabled: flexibleBoolean,
  url: taskUrl.nullable(),
  token: safeText(1024).nullable(),
  triggers: distinctList(z.enum(NOTIFICATION_TRIGGERS, { error: `must be one of ${NOTIFICATION_TRIGGERS.join(', ')}` })),
  'email-addresses': distinctList(emailAddress),
};
const relationships = z
  .object({ users: z.object({ data: z.array(identifier('users')) }).optional() })
  .passthrough()
  .optional();
// go-tfe v1.90.0 names the subscribable in the body too (a workspace or a team); it must be the one in the path.
const subscribableRelationship = z
  .object({
    data: z.object({
      type: z.enum(['workspaces', 'teams'], { error: 'must be "workspaces" or "teams"' }),
      id: z.string().min(1, 'must not be empty').max(64, 'must be at most 64 characters'),
    }),
  })
  .optional();

const createSchema = z.object({
  data: z.object({
    type: TYPE,
    attributes: z.object({
      ...common,
      'destination-type': z.enum(NOTIFICATION_DESTINATION_TYPES, { error: `must be one of ${NOTIFICATION_DESTINATION_TYPES.join(', ')}` }),
      enabled: common.enabled.optional(),
      url: common.url.optional(),
      token: common.token.optional(),
      triggers: common.triggers.optional(),
      'email-addresses': common['email-addresses'].optional(),
    }),
    relationships: z
      .object({ users: z.object({ data: z.array(identifier('users')) }).optional(), subscribable: subscribableRelationship })
      .passthrough()
      .optional(),
  }),
});

const updateSchema = z.object({
  data: z.object({
    type: TYPE,
    id: z.string().optional(),
    attributes: z
      .object({
        name: common.name.optional(),
        enabled: common.enabled.optional(),
        url: common.url.optional(),
        token: common.token.optional(),
        triggers: common.triggers.optional(),
        'email-addresses': common['email-addresses'].optional(),
      })
      .default({}),
    relationships,
  }),
});

// No body, or `{}`: the configuration is verified as saved.
const verifySchema = z.object({}).optional();

const workspaceId = (ctx: ApiContext) => ({ id: ctx.params['workspace_id'] ?? '' });
const configurationId = (ctx: ApiContext) => ctx.params['configuration_id'] ?? '';

/** The path's subscribable, found with the caller's scope (a 404 otherwise): a workspace it administers or a team it manages. */
type Owner = { kind: 'workspaces'; workspace: Workspace } | { kind: 'teams'; team: Team };
async function ownerOf(ctx: ApiContext, kind: Owner['kind']): Promise<Owner> {
  if (kind === 'teams') return { kind, team: await findManagedTeam(ctx, ctx.params['team_id'] ?? '') };
  return { kind, workspace: await findWorkspace(ctx, 'manage', workspaceId(ctx)) };
}
const ownerId = (owner: Owner): string => (owner.kind === 'teams' ? owner.team.id : owner.workspace.id);
const subscribable = (owner: Owner): Subscribable =>
  owner.kind === 'teams' ? { kind: 'teams', teamId: owner.team.id } : { kind: 'workspaces', workspaceId: owner.workspace.id };

/** The cross-attribute rules, as a 422 at the first broken one. */
function checkShape(configuration: NotificationConfiguration): void {
  const problem = configurationProblem({
    subscribable: subscribableOf(configuration).kind,
    triggers: configuration.triggers,
    destinationType: configuration.destinationType,
    url: configuration.url ?? null,
    emailAddresses: configuration.emailAddresses,
    emailUserIds: configuration.emailUserIds,
  });
  if (problem) throw invalidAttribute(problem.pointer, problem.detail);
}

/** An empty token means none, as an empty HMAC key does for tasks. */
const tokenOf = (ctx: ApiContext, token: string | null): string | null => (token ? ctx.deps.secrets.encrypt(token) : null);

const list = (kind: Owner['kind']) => async (ctx: ApiContext) => {
  const owner = await ownerOf(ctx, kind);
  const where = (
    owner.kind === 'teams' ? { team: owner.team.id } : { workspace: owner.workspace.id }
  ) as FilterQuery<NotificationConfiguration>;
  const all = await ctx.state.em.find(NotificationConfiguration, where, {
    orderBy: { createdAt: 'asc', id: 'asc' },
    populate: ['workspace', 'team'],
  });
  const responses = await deliveryResponsesOf(await poolOf(ctx), all);
  const data = all.map((configuration) => serializeNotificationConfiguration(configuration, responses.get(configuration.id)));
  // Asked for no page, the whole list and no pagination (HCP's unpaginated answer, which go-tfe's test expects).
  if (ctx.query['page[number]'] === undefined && ctx.query['page[size]'] === undefined) {
    respond(ctx, 200, { data });
    return;
  }
  const page = parsePage(ctx.query);
  respond(ctx, 200, collection(data.slice(page.offset, page.offset + page.size), page, all.length, publicRequestUrl(ctx)));
};

const create = (kind: Owner['kind']) => async (ctx: ApiContext) => {
  const owner = await ownerOf(ctx, kind);
  const { attributes, relationships: links } = parseWith(createSchema, ctx.request.body).data;
  // A subscribable named in the body is the path's (go-tfe sends both); another one is a 422, not a move.
  const named = links?.subscribable?.data;
  if (named && (named.type !== owner.kind || named.id !== ownerId(owner))) {
    throw invalidAttribute(
      '/data/relationships/subscribable/data',
      `The subscribable must be the ${owner.kind === 'teams' ? 'team' : 'workspace'} ${ownerId(owner)} of the path.`,
    );
  }
  const destinationType: NotificationDestinationType = attributes['destination-type'];
  const configuration = ctx.state.em.create(
    NotificationConfiguration,
    {
      id: newId('notificationConfiguration'),
      workspace: owner.kind === 'workspaces' ? owner.workspace : null,
      team: owner.kind === 'teams' ? owner.team : null,
      name: attributes.name,
      destinationType,
      url: attributes.url ?? null,
      tokenEncrypted: tokenOf(ctx, attributes.token ?? null),
      enabled: attributes.enabled ?? false,
      triggers: attributes.triggers ?? [],
      emailAddresses: attributes['email-addresses'] ?? [],
      emailUserIds: (links?.users?.data ?? []).map((user) => user.id),
      deliveryResponses: [],
      // Persisted only once every rule passed and an enabled webhook answered its verification.
    },
    { persist: false },
  );
  checkShape(configuration);
  await checkEmailUsers(await poolOf(ctx), organizationOf(configuration), configuration.emailUserIds);
  await assertRoomForAnother(ctx.state.em, subscribable(owner));
  // Saved enabled, a webhook is verified first, as HCP does: one that does not answer is not saved.
  if (configuration.enabled && destinationType !== 'email') await verifyConfiguration(ctx.deps, configuration, await poolOf(ctx));
  await ctx.state.em.persist(configuration).flush();
  respond(ctx, 201, single(serializeNotificationConfiguration(configuration)));
};

/** A configuration's document with its deliveries' answers among its `delivery-responses`. */
async function serializeWithResponses(ctx: ApiContext, configuration: NotificationConfiguration) {
  const responses = await deliveryResponsesOf(await poolOf(ctx), [configuration]);
  return serializeNotificationConfiguration(configuration, responses.get(configuration.id));
}

async function show(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(await serializeWithResponses(ctx, await findConfiguration(ctx, configurationId(ctx)))));
}

async function update(ctx: ApiContext): Promise<void> {
  const configuration = await findConfiguration(ctx, configurationId(ctx));
  const body: unknown = ctx.request.body;
  const empty = body === undefined || (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0);
  const { attributes, relationships: links } = parseWith(
    updateSchema,
    empty ? { data: { type: 'notification-configurations' } } : body,
  ).data;
  const before = { url: configuration.url, token: configuration.tokenEncrypted, enabled: configuration.enabled };
  if (attributes.name !== undefined) configuration.name = attributes.name;
  if (attributes.enabled !== undefined) configuration.enabled = attributes.enabled;
  if (attributes.url !== undefined) configuration.url = attributes.url;
  if (attributes.token !== undefined) configuration.tokenEncrypted = tokenOf(ctx, attributes.token);
  if (attributes.triggers !== undefined) configuration.triggers = attributes.triggers;
  if (attributes['email-addresses'] !== undefined) configuration.emailAddresses = attributes['email-addresses'];
  // Users left out are cleared (HCP's update replaces the relationship; go-tfe's test expects none after).
  configuration.emailUserIds = (links?.users?.data ?? []).map((user) => user.id);
  checkShape(configuration);
  await checkEmailUsers(await poolOf(ctx), organizationOf(configuration), configuration.emailUserIds);
  const destinationChanged =
    before.url !== configuration.url || before.token !== configuration.tokenEncrypted || before.enabled !== configuration.enabled;
  if (configuration.enabled && destinationChanged && configuration.destinationType !== 'email') {
    await verifyConfiguration(ctx.deps, configuration, await poolOf(ctx));
  }
  await ctx.state.em.flush();
  respond(ctx, 200, single(await serializeWithResponses(ctx, configuration)));
}

async function remove(ctx: ApiContext): Promise<void> {
  const configuration = await findConfiguration(ctx, configurationId(ctx));
  await ctx.state.em.remove(configuration).flush();
  respond(ctx, 204);
}

async function verify(ctx: ApiContext): Promise<void> {
  parseWith(verifySchema, ctx.request.body);
  const configuration = await findConfiguration(ctx, configurationId(ctx));
  try {
    await verifyConfiguration(ctx.deps, configuration, await poolOf(ctx));
  } finally {
    // The answer is kept either way: a failed verification is what its author wants to read.
    await ctx.state.em.flush();
  }
  respond(ctx, 200, single(await serializeWithResponses(ctx, configuration)));
}

const ADMIN =
  "Takes admin access to the workspace (an organization token, or a team that manages workspaces), or, for a team's configuration, managing the team (the organization's owners); anyone else gets 404.";
const TEAM_ADMIN = "Takes managing the team (the organization's owners, as for teams themselves); anyone else gets 404.";

export const notificationConfigurationRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/workspaces/:workspace_id/notification-configurations',
    auth: 'token',
    summary: "List a workspace's notification configurations",
    notes: `${ADMIN} Without page parameters, every configuration and no pagination (as HCP).`,
    query: { page: true },
    handler: list('workspaces'),
  },
  {
    method: 'GET',
    path: '/teams/:team_id/notification-configurations',
    auth: 'token',
    summary: "List a team's notification configurations",
    notes: `${TEAM_ADMIN} Without page parameters, every configuration and no pagination (as HCP).`,
    query: { page: true },
    handler: list('teams'),
  },
  {
    method: 'POST',
    path: '/workspaces/:workspace_id/notification-configurations',
    auth: 'token',
    summary: 'Create a notification configuration',
    notes: `${ADMIN} At most 20 per workspace. An enabled webhook is verified first; one that does not answer 2xx is a 400 and nothing is saved.`,
    requestSchema: createSchema,
    handler: create('workspaces'),
  },
  {
    method: 'POST',
    path: '/teams/:team_id/notification-configurations',
    auth: 'token',
    summary: 'Create a team notification configuration',
    notes: `${TEAM_ADMIN} HCP's team triggers only (change_request:created; there are no change requests here, so nothing is sent for it). At most 20 per team. An enabled webhook is verified first.`,
    requestSchema: createSchema,
    handler: create('teams'),
  },
  {
    method: 'GET',
    path: '/notification-configurations/:configuration_id',
    auth: 'token',
    summary: 'Show a notification configuration',
    notes: ADMIN,
    handler: show,
  },
  {
    method: 'PATCH',
    path: '/notification-configurations/:configuration_id',
    auth: 'token',
    summary: 'Update a notification configuration',
    notes: `${ADMIN} Users left out of the relationships are cleared. Enabling, or changing the URL or token of an enabled webhook, verifies it first.`,
    requestSchema: updateSchema,
    optionalBody: true,
    handler: update,
  },
  {
    method: 'DELETE',
    path: '/notification-configurations/:configuration_id',
    auth: 'token',
    summary: 'Delete a notification configuration',
    notes: ADMIN,
    handler: remove,
  },
  {
    method: 'POST',
    path: '/notification-configurations/:configuration_id/actions/verify',
    auth: 'token',
    summary: 'Send a verification',
    notes: `${ADMIN} Sends HCP's verification payload at once (a test email for email configurations) and records the answer in delivery-responses; not delivered: 400.`,
    requestSchema: verifySchema,
    response: { status: 200 },
    handler: verify,
  },
];
