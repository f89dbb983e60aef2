import type { ApiToken } from '@runtasks/shared';
import { selfLink, timestamp, type Resource } from '../http/jsonapi.ts';

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
    links: selfLink(`/authentication-tokens/${token.id}`),
  };
}
