import { defineEntity, p } from '@mikro-orm/core';
import { ApiToken } from './api-token.entity.ts';
import { User } from './user.entity.ts';

/**
 * A browser's sign-in to the run pages, with an API token or through single sign-on (a user): exactly
 * one of the two. Only a keyed hash of the session id is stored, so a copy of the table opens no
 * session; the session lives no longer than its token (the lookup joins the token's revocation and
 * expiry, and deleting the token deletes its sessions) or its user.
 */
const PageSessionSchema = defineEntity({
  name: 'PageSession',
  tableName: 'page_sessions',
  indexes: [
    { name: 'page_sessions_token_idx', properties: ['token'] },
    { name: 'page_sessions_expires_idx', properties: ['expiresAt'] },
    { name: 'page_sessions_user_idx', properties: ['user'] },
  ],
  checks: [
    // Exactly one subject: a token or a person. As PostgreSQL prints it back.
    { name: 'page_sessions_subject_check', expression: '((token_id IS NULL) <> (user_id IS NULL))' },
  ],
  properties: {
    idHash: p.string().length(64).primary(),
    token: () => p.manyToOne(ApiToken).deleteRule('cascade').nullable(),
    user: () => p.manyToOne(User).deleteRule('cascade').nullable(),
    createdAt: p.datetime().onCreate(() => new Date()),
    expiresAt: p.datetime(),
  },
});

export class PageSession extends PageSessionSchema.class {}
PageSessionSchema.setClass(PageSession);
