import { defineEntity, p } from '@mikro-orm/core';
import { User } from './user.entity.ts';

/**
 * A person's identity at an OpenID Connect issuer (its `sub`), naming their user: how a returning
 * person is found whatever their address has become (docs/sso.md).
 */
const UserIdentitySchema = defineEntity({
  name: 'UserIdentity',
  tableName: 'user_identities',
  properties: {
    issuer: p.text().primary(),
    subject: p.text().primary(),
    user: () => p.manyToOne(User).deleteRule('cascade').index('user_identities_user_idx'),
    createdAt: p.datetime(),
  },
});

export class UserIdentity extends UserIdentitySchema.class {}
UserIdentitySchema.setClass(UserIdentity);

/**
 * A sign-in under way: its state, nonce and PKCE verifier (encrypted), bound to the browser by a cookie
 * whose keyed hash is the key, until the provider sends the browser back or it expires.
 */
const OidcSignInSchema = defineEntity({
  name: 'OidcSignIn',
  tableName: 'oidc_sign_ins',
  indexes: [{ name: 'oidc_sign_ins_expires_idx', properties: ['expiresAt'] }],
  properties: {
    idHash: p.string().length(64).primary(),
    state: p.text(),
    nonce: p.text(),
    codeVerifier: p.text(),
    next: p.text().nullable(),
    expiresAt: p.datetime(),
  },
});

export class OidcSignIn extends OidcSignInSchema.class {}
OidcSignInSchema.setClass(OidcSignIn);
