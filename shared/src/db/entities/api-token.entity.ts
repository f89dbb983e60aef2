import { defineEntity, p } from '@mikro-orm/core';
import { PRINCIPALS_NOTIFY, TOKEN_CREATED_NOTIFY } from '../principals-notify.ts';
import { Organization } from './organization.entity.ts';
import { Team } from './team.entity.ts';
import { User } from './user.entity.ts';

export const TOKEN_KINDS = ['admin', 'organization', 'team', 'user'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

const ApiTokenSchema = defineEntity({
  name: 'ApiToken',
  tableName: 'api_tokens',
  // API processes remember principals by token: any change that can alter one tells them to forget.
  triggers: [
    {
      name: 'api_tokens_principal_update',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      // As PostgreSQL prints it back (the schema comparison is textual): last_used_at alone is no change.
      when: '((old.kind <> new.kind) OR ((old.token_hash)::text <> (new.token_hash)::text) OR ((old.organization_id)::text IS DISTINCT FROM (new.organization_id)::text) OR ((old.team_id)::text IS DISTINCT FROM (new.team_id)::text) OR (old.expires_at IS DISTINCT FROM new.expires_at) OR (old.revoked_at IS DISTINCT FROM new.revoked_at))',
      body: PRINCIPALS_NOTIFY,
    },
    { name: 'api_tokens_principal_delete', timing: 'after', events: ['delete'], forEach: 'statement', body: PRINCIPALS_NOTIFY },
    // A token created may be one a process refused a moment ago: each forgets the tokens it refused.
    { name: 'api_tokens_created', timing: 'after', events: ['insert'], forEach: 'statement', body: TOKEN_CREATED_NOTIFY },
  ],
  indexes: [
    { name: 'api_tokens_organization_idx', properties: ['organization'] },
    { name: 'api_tokens_team_idx', properties: ['team'] },
    { name: 'api_tokens_user_idx', properties: ['user'] },
  ],
  properties: {
    id: p.string().length(32).primary(),
    kind: p.enum(TOKEN_KINDS),
    organization: () => p.manyToOne(Organization).nullable().deleteRule('cascade'),
    team: () => p.manyToOne(Team).nullable().deleteRule('cascade'),
    // A user token's user: it reaches what the user's memberships do, whichever organizations those are.
    user: () => p.manyToOne(User).nullable().deleteRule('cascade'),
    // HMAC-SHA256 of the token under the server's secret key: a stolen table does not yield usable tokens.
    tokenHash: p.string().length(64).unique(),
    description: p.text().nullable(),
    // Who created this token (HCP's `created-by`): the acting principal's user id (api's auth/actor.ts).
    createdBy: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    lastUsedAt: p.datetime().nullable(),
  },
});

export class ApiToken extends ApiTokenSchema.class {}
ApiTokenSchema.setClass(ApiToken);
