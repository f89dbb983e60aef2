import { defineEntity, p } from '@mikro-orm/core';
import type { NotificationDestinationType, NotificationTrigger } from '../../domain/notifications.ts';
import { Team } from './team.entity.ts';
import { Workspace } from './workspace.entity.ts';

/** One answer of a destination, as HCP shows it in `delivery-responses`. */
export interface DeliveryResponse {
  url: string;
  body: string;
  code: string;
  headers: Record<string, string[]>;
  'sent-at': string;
  successful: string;
}

/**
 * A workspace's or a team's notification configuration (HCP's `notification-configurations`, whose
 * `subscribable` is one or the other): where events are told, and which. The token signs generic payloads and is kept encrypted (never shown). Email
 * recipients are addresses and user ids (resolved to addresses when a message is sent).
 */
const NotificationConfigurationSchema = defineEntity({
  name: 'NotificationConfiguration',
  tableName: 'notification_configurations',
  indexes: [
    { name: 'notification_configurations_workspace_idx', properties: ['workspace', 'createdAt'] },
    { name: 'notification_configurations_team_idx', properties: ['team', 'createdAt'] },
  ],
  checks: [
    {
      // Exactly one subscribable: a workspace or a team. As PostgreSQL prints it back.
      name: 'notification_configurations_subscribable_check',
      expression: '((workspace_id IS NULL) <> (team_id IS NULL))',
    },
  ],
  properties: {
    id: p.string().length(32).primary(),
    workspace: () => p.manyToOne(Workspace).nullable().deleteRule('cascade'),
    team: () => p.manyToOne(Team).nullable().deleteRule('cascade'),
    name: p.text(),
    destinationType: p.text().$type<NotificationDestinationType>(),
    url: p.text().nullable(),
    tokenEncrypted: p.text().nullable(),
    enabled: p.boolean().default(false),
    triggers: p.json<NotificationTrigger[]>(),
    emailAddresses: p.json<string[]>(),
    emailUserIds: p.json<string[]>(),
    deliveryResponses: p.json<DeliveryResponse[]>(),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class NotificationConfiguration extends NotificationConfigurationSchema.class {}
NotificationConfigurationSchema.setClass(NotificationConfiguration);
