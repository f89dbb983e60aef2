import { parseActor } from '../auth/actor.ts';
import { selfLink, timestamp, toOne, type Resource } from '../http/jsonapi.ts';
import { collection, type Page } from '../http/pagination.ts';

/** What a token document shows: an API token's, or an organization's audit trail token's. */
export interface TokenView {
  id: string;
  description?: string | null;
  createdAt: Date;
  lastUsedAt?: Date | null;
  expiresAt?: Date | null;
  createdBy?: string | null;
  team?: { id: string } | null;
}

/** The plaintext token is included only in the response that creates it. */
export function serializeToken(token: TokenView, secret?: string): Resource {
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

/** A page of tokens (a user's, or an organization's team tokens), none with its secret. */
export const tokenCollection = (tokens: readonly TokenView[], page: Page, total: number, requestUrl: URL) =>
  collection(
    tokens.map((token) => serializeToken(token)),
    page,
    total,
    requestUrl,
  );
