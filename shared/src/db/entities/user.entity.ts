import { defineEntity, p } from '@mikro-orm/core';
import { PRINCIPALS_NOTIFY } from '../principals-notify.ts';

/**
 * A person (HCP's `users`, ids `user-` and 16 alphanumerics). Distinct from the service users that
 * stand for team, organization and site-admin tokens (`user-api-…`, `user-site-admin`, never stored):
 * a person belongs to organizations through memberships and acts with user tokens. `email` is kept in
 * lower case, so an invitation finds the same person however the address was typed. A site admin
 * (`isAdmin`) acts with the site admin's rights, as ADMIN_TOKEN does, and may create organizations.
 */
const UserSchema = defineEntity({
  name: 'User',
  tableName: 'users',
  // A user token's principal carries whether its user is a site admin: a change tells API processes to forget it.
  triggers: [
    {
      name: 'users_principal_update',
      timing: 'after',
      events: ['update'],
      forEach: 'row',
      when: '(old.is_admin <> new.is_admin)',
      body: PRINCIPALS_NOTIFY,
    },
    { name: 'users_principal_delete', timing: 'after', events: ['delete'], forEach: 'statement', body: PRINCIPALS_NOTIFY },
  ],
  properties: {
    id: p.string().length(32).primary(),
    username: p.string().length(255).unique(),
    email: p.string().length(255).unique(),
    isAdmin: p.boolean().default(false),
    createdAt: p.datetime().onCreate(() => new Date()),
    updatedAt: p
      .datetime()
      .onCreate(() => new Date())
      .onUpdate(() => new Date()),
  },
});

export class User extends UserSchema.class {}
UserSchema.setClass(User);
