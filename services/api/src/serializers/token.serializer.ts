import type { ApiToken } from '@runtasks/shared/db';
import { parseActor } from '../auth/actor.ts';
import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';

/** The plaintext token is included only in the response that creates it. */
export function serializeToken(token: ApiToken, secret?: string): Resource {
  return {
    id: token.id,
    type: 'authentication-tokens',
    attributes: {
      description: token.description ?? null,
      token: secret ?? null,
      'created-at': timestamp(token.createdAt),
      'last-used-at': timestamp(token.lastUsedAt),
      'expired-at': timestamp(token.expiresAt),
    },
    relationships: {
      // A team token names its team, as HCP's does (go-tfe's TeamToken reads it).
      ...(token.team && { team: toOne('teams', token.team.id) }),
      // The creator's service user (actor.ts); null for a token created before creators were recorded.
      'created-by': toOne('users', parseActor(token.createdBy) ? token.createdBy : null),
    },
    links: selfLink(`/authentication-tokens/${token.id}`),
  };
}
