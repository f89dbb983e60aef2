import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { NotificationConfiguration, Team, type DeliveryResponse } from '@runtasks/shared/db';
import { DELIVERY_RESPONSES_KEPT, MAX_NOTIFICATION_CONFIGURATIONS } from '@runtasks/shared/domain';
import { ApiError, invalidAttribute, notFound } from '@runtasks/shared/errors';
import { createMailer, emailsOfUsers, sendNotification, verificationFacts } from '@runtasks/shared/notifications';
import type { Pool } from 'pg';
import { ownerOrganizationScope, workspaceScope, type ScopeFilter } from '../auth/scopes.ts';
import type { ApiContext, ApiDeps } from '../context.ts';

/**
 * Notification configurations' rules (docs/notifications.md). Every one takes what HCP asks for them:
 * a workspace's, admin of the workspace (an organization token, or a team that manages workspaces); a
 * team's, managing the team (as teams themselves: the organization's owners). Anyone else gets the 404
 * of a configuration that does not exist.
 */

/** What a configuration belongs to: a workspace or a team (HCP's polymorphic `subscribable`). */
export type Subscribable = { kind: 'workspaces'; workspaceId: string } | { kind: 'teams'; teamId: string };

/** The subscribable of a saved configuration (the table's check keeps exactly one set). */
export const subscribableOf = (configuration: NotificationConfiguration): Subscribable =>
  configuration.team
    ? { kind: 'teams', teamId: configuration.team.id }
    : { kind: 'workspaces', workspaceId: configuration.workspace?.id ?? '' };

/** The organization a configuration's subscribable belongs to (both are loaded with it). */
export const organizationOf = (configuration: NotificationConfiguration): string =>
  (configuration.team?.organization.id ?? configuration.workspace?.organization.id) as string;

/** A configuration the caller may manage, by id (one query with the scope: missing and forbidden are one 404). */
export async function findConfiguration(ctx: ApiContext, id: string): Promise<NotificationConfiguration> {
  const workspaces = workspaceScope(ctx.state.principal, 'manage');
  const teams = ownerOrganizationScope(ctx.state.principal);
  const branches: ScopeFilter[] = [];
  if (workspaces) branches.push({ workspace: workspaces });
  if (teams) branches.push({ team: { organization: teams } });
  if (branches.length === 0) throw notFound();
  const where = { id, $or: branches } as FilterQuery<NotificationConfiguration>;
  const found = await ctx.state.em.findOne(NotificationConfiguration, where, { populate: ['workspace', 'team'] });
  if (!found) throw notFound();
  return found;
}

/** A team whose notification configurations the caller may manage (the owners of its organization), or the 404 of a missing one. */
export async function findManagedTeam(ctx: ApiContext, id: string): Promise<Team> {
  const scope = ownerOrganizationScope(ctx.state.principal);
  const team =
    scope && (await ctx.state.em.findOne(Team, { id, organization: scope } as FilterQuery<Team>, { populate: ['organization'] }));
  if (!team) throw notFound();
  return team;
}

/** HCP allows 20 configurations per workspace and per team; the 21st is a 422. */
export async function assertRoomForAnother(em: EntityManager, subscribable: Subscribable): Promise<void> {
  const where = subscribable.kind === 'teams' ? { team: subscribable.teamId } : { workspace: subscribable.workspaceId };
  if ((await em.count(NotificationConfiguration, where)) >= MAX_NOTIFICATION_CONFIGURATIONS) {
    const owner = subscribable.kind === 'teams' ? 'team' : 'workspace';
    throw new ApiError(
      422,
      'notification configuration limit reached',
      `A ${owner} has at most ${MAX_NOTIFICATION_CONFIGURATIONS} notification configurations; delete one first.`,
      { pointer: '/data' },
    );
  }
}

/** Every given user id must name a member of the organization; a 422 at the first that does not. */
export async function checkEmailUsers(pool: Pool, organizationId: string, ids: readonly string[]): Promise<void> {
  const known = await emailsOfUsers(pool, organizationId, ids);
  const index = ids.findIndex((id) => !known.has(id));
  if (index >= 0)
    throw invalidAttribute(`/data/relationships/users/data/${index}/id`, `User ${ids[index]} is not a member of this organization.`);
}

/** The latest responses first, at most DELIVERY_RESPONSES_KEPT of them. */
export const withResponse = (responses: readonly DeliveryResponse[], response: DeliveryResponse): DeliveryResponse[] =>
  [response, ...responses].slice(0, DELIVERY_RESPONSES_KEPT);

/**
 * HCP's verification: its payload sent at once (a test email for email configurations), the answer
 * recorded in `delivery-responses`. Anything but a delivery is a 400 naming what the destination answered.
 */
export async function verifyConfiguration(deps: ApiDeps, configuration: NotificationConfiguration, pool: Pool): Promise<void> {
  const users = await emailsOfUsers(pool, organizationOf(configuration), configuration.emailUserIds);
  const mailer = createMailer(deps.config.smtpUrl, deps.config.smtpFrom);
  try {
    const outcome = await sendNotification(
      {
        destinationType: configuration.destinationType,
        url: configuration.url ?? null,
        token: configuration.tokenEncrypted ? deps.secrets.decrypt(configuration.tokenEncrypted) : null,
        recipients: [...configuration.emailAddresses, ...users.values()],
      },
      verificationFacts(configuration.id, configuration.name),
      { client: deps.taskClient, mailer, timeoutMs: deps.config.taskVerificationTimeoutSeconds * 1000 },
    );
    configuration.deliveryResponses = withResponse(configuration.deliveryResponses, outcome.response);
    if (outcome.result !== 'delivered') {
      throw new ApiError(400, 'verification failed', `The verification was not delivered: ${outcome.error ?? 'no answer'}.`, {
        pointer: configuration.destinationType === 'email' ? '/data/attributes/email-addresses' : '/data/attributes/url',
      });
    }
  } finally {
    mailer?.transport.close();
  }
}
