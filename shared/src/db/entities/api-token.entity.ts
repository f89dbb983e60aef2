import { defineEntity, p } from '@mikro-orm/core';
import { Organization } from './organization.entity.ts';
import { Team } from './team.entity.ts';

export const TOKEN_KINDS = ['admin', 'organization', 'team'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

const ApiTokenSchema = defineEntity({
  name: 'ApiToken',
  tableName: 'api_tokens',
  indexes: [
    { name: 'api_tokens_organization_idx', properties: ['organization'] },
    { name: 'api_tokens_team_idx', properties: ['team'] },
  ],
  properties: {
    id: p.string().length(32).primary(),
    kind: p.enum(TOKEN_KINDS),
    organization: () => p.manyToOne(Organization).nullable().deleteRule('cascade'),
    team: () => p.manyToOne(Team).nullable().deleteRule('cascade'),
    // HMAC-SHA256 of the token under the server's secret key: a stolen table does not yield usable tokens.
    tokenHash: p.string().length(64).unique(),
    description: p.text().nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime().nullable(),
    revokedAt: p.datetime().nullable(),
    lastUsedAt: p.datetime().nullable(),
  },
});

export class ApiToken extends ApiTokenSchema.class {}
ApiTokenSchema.setClass(ApiToken);
