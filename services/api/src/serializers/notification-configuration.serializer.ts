import type { DeliveryResponse, NotificationConfiguration } from '@runtasks/shared/db';
import { selfLink, timestamp, toMany, toOne, type Resource } from '../http/jsonapi.ts';

/**
 * HCP's `notification-configurations` document. `token` is write-only: always null. `users` are the
 * email recipients by id (bare identifiers, as HCP gives them), `subscribable` the workspace or the team.
 * `responses` are its `delivery-responses` (deliveryResponsesOf: its deliveries keep their own answers);
 * left out, those it holds itself (a configuration just created has no deliveries).
 */
export function serializeNotificationConfiguration(
  configuration: NotificationConfiguration,
  responses: readonly DeliveryResponse[] = configuration.deliveryResponses,
): Resource {
  return {
    id: configuration.id,
    type: 'notification-configurations',
    attributes: {
      'created-at': timestamp(configuration.createdAt),
      'updated-at': timestamp(configuration.updatedAt),
      'destination-type': configuration.destinationType,
      enabled: configuration.enabled,
      name: configuration.name,
      url: configuration.url ?? null,
      token: null,
      triggers: configuration.triggers,
      'email-addresses': configuration.emailAddresses,
      'delivery-responses': responses,
    },
    relationships: {
      // HCP's polymorphic relationship: the team of a team's configuration, else the workspace.
      subscribable: configuration.team ? toOne('teams', configuration.team.id) : toOne('workspaces', configuration.workspace?.id ?? ''),
      users: toMany('users', configuration.emailUserIds),
    },
    links: selfLink(`/notification-configurations/${configuration.id}`),
  };
}
