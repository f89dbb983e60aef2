import { defineEntity, p } from '@mikro-orm/core';
import { ApiToken } from './api-token.entity.ts';

/**
 * A browser's sign-in to the run pages with an API token. Only a keyed hash of the session id is
 * stored, so a copy of the table opens no session; the session lives no longer than its token (the
 * lookup joins the token's revocation and expiry, and deleting the token deletes its sessions).
 */
const PageSessionSchema = defineEntity({
  name: 'PageSession',
  tableName: 'page_sessions',
  indexes: [
    { name: 'page_sessions_token_idx', properties: ['token'] },
    { name: 'page_sessions_expires_idx', properties: ['expiresAt'] },
  ],
  properties: {
    idHash: p.string().length(64).primary(),
    token: () => p.manyToOne(ApiToken).deleteRule('cascade'),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime(),
  },
});

export class PageSession extends PageSessionSchema.class {}
PageSessionSchema.setClass(PageSession);
