import type { OrganizationMembership, User } from '@runtasks/shared/db';
import { createHash } from 'node:crypto';
import { actorUsername, type ServiceActor } from '../auth/actor.ts';
import { selfLink, toMany, toOne, type Resource } from '../http/jsonapi.ts';

/** Gravatar's picture for the address, or its default silhouette: HCP's `avatar-url` (go-tfe expects one). */
export const avatarUrl = (email: string): string =>
  `https://www.gravatar.com/avatar/${createHash('md5').update(email.trim().toLowerCase()).digest('hex')}?s=100&d=mm`;

/** What a user may do with their own account here (HCP's `permissions`): names and tokens, no HCP account or 2FA. */
const OWN_PERMISSIONS = (user: { isAdmin: boolean }) => ({
  'can-create-organizations': user.isAdmin,
  'can-change-email': true,
  'can-change-username': true,
  'can-manage-user-tokens': true,
  'can-view2fa-settings': false,
  'can-manage-hcp-account': false,
});
const NO_PERMISSIONS = {
  'can-create-organizations': false,
  'can-change-email': false,
  'can-change-username': false,
  'can-manage-user-tokens': false,
  'can-view2fa-settings': false,
  'can-manage-hcp-account': false,
};
const TWO_FACTOR = { enabled: false, verified: false };

/**
 * A person. `own`: the caller's own account (or the site admin's view), with the email address and
 * the account's permissions; anyone else who sees the user gets the public fields only, as HCP's
 * `GET /users/:id` does (no email).
 */
export function serializeUser(user: User, own: boolean): Resource {
  return {
    id: user.id,
    type: 'users',
    attributes: {
      username: user.username,
      'avatar-url': avatarUrl(user.email),
      'is-service-account': false,
      'v2-only': false,
      'is-admin': user.isAdmin,
      'is-site-admin': user.isAdmin,
      'is-sso-login': false,
      'two-factor': TWO_FACTOR,
      ...(own && { email: user.email, 'unconfirmed-email': null, 'auth-method': 'token', permissions: OWN_PERMISSIONS(user) }),
    },
    relationships: { 'authentication-tokens': { data: null, links: { related: `/api/v2/users/${user.id}/authentication-tokens` } } },
    links: selfLink(`/users/${user.id}`),
  };
}

/** The service user a team, organization or site-admin token acts as (`GET /account/details` with such a token). */
export function serializeServiceUser(id: string, actor: ServiceActor): Resource {
  return {
    id,
    type: 'users',
    attributes: {
      username: actorUsername(actor),
      email: null,
      'unconfirmed-email': null,
      'avatar-url': avatarUrl(`${id}@service.invalid`),
      'is-service-account': true,
      'v2-only': true,
      'is-admin': actor.kind === 'admin',
      'is-site-admin': actor.kind === 'admin',
      'is-sso-login': false,
      'two-factor': TWO_FACTOR,
      permissions: { ...NO_PERMISSIONS, 'can-create-organizations': actor.kind === 'admin' },
    },
    links: selfLink(`/users/${id}`),
  };
}

/** An organization membership: `organization` names the organization by name, as HCP's does; `teams` the member's teams here. */
export function serializeMembership(membership: OrganizationMembership, organizationName: string, teamIds: readonly string[]): Resource {
  return {
    id: membership.id,
    type: 'organization-memberships',
    attributes: { status: membership.status, email: membership.user.email, 'created-at': membership.createdAt.toISOString() },
    relationships: {
      organization: toOne('organizations', organizationName),
      user: toOne('users', membership.user.id),
      teams: toMany('teams', teamIds),
    },
    links: selfLink(`/organization-memberships/${membership.id}`),
  };
}
