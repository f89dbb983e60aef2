import { ApiError, invalidAttribute } from '@runtasks/shared/errors';
import { ApiToken, OrganizationMembership, User } from '@runtasks/shared/db';
import { z } from 'zod';
import { actorId, parseActor } from '../auth/actor.ts';
import { principalsChanged } from '../auth/authenticate.ts';
import { organizationsWhere, type Principal } from '../auth/principal.ts';
import { issueToken } from '../auth/tokens.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { parsePage } from '../http/pagination.ts';
import { serializeToken, tokenCollection } from '../serializers/token.serializer.ts';
import { serializeServiceUser, serializeUser } from '../serializers/user.serializer.ts';
import { normalizeEmail } from '../services/users.service.ts';
import { orNotFound, publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { NAME_PATTERN } from './schemas.ts';
import { expiryOf, parseTokenAttributes, tokenCreateSchema } from './tokens.routes.ts';

/**
 * Users and their tokens (HCP's account, users and user tokens APIs): the caller's own account, a
 * user's public fields, and a person's tokens, which they (or the site admin, who gives an invited
 * person their first token) create and list. docs/api.md, "People".
 */

const updateSchema = z.object({
  data: z.object({
    type: z.literal('users'),
    attributes: z
      .object({
        username: z
          .string()
          .min(1, 'must not be empty')
          .max(255, 'must be at most 255 characters')
          .regex(NAME_PATTERN, 'may only contain letters, numbers, - and _')
          .optional(),
        email: z.email('must be a valid email address').max(255, 'must be at most 255 characters').optional(),
      })
      .default({}),
  }),
});

/** The person acting, if a person acts (a user token, or a site admin's own). */
const personOf = (principal: Principal): string | undefined =>
  principal.kind === 'user' || principal.kind === 'admin' ? principal.userId : undefined;

async function ownUser(ctx: ApiContext): Promise<User | null> {
  const userId = personOf(ctx.state.principal);
  return userId ? ctx.state.em.findOne(User, { id: userId }) : null;
}

/** The token's user; for a token of a team, an organization or ADMIN_TOKEN, the service user it acts as. */
async function details(ctx: ApiContext): Promise<void> {
  const user = await ownUser(ctx);
  if (user) return respond(ctx, 200, single(serializeUser(user, true)));
  const id = actorId(ctx.state.principal);
  const actor = parseActor(id);
  if (!actor || actor.kind === 'user') throw new ApiError(404, 'not found');
  respond(ctx, 200, single(serializeServiceUser(id, actor)));
}

/** A new username or email address, each unique; a new address takes effect at once (there is no mail to confirm it with). */
async function update(ctx: ApiContext): Promise<void> {
  const user = await ownUser(ctx);
  // A token of a team, an organization or ADMIN_TOKEN has no person's account: nothing to change.
  if (!user) throw new ApiError(404, 'not found');
  const { attributes } = parseWith(updateSchema, ctx.request.body).data;
  if (attributes.username !== undefined) user.username = attributes.username;
  if (attributes.email !== undefined) user.email = normalizeEmail(attributes.email);
  // Each taken value named where it was given; a race past these checks is still refused by the unique constraints.
  const taken = async (field: 'username' | 'email', value: string) =>
    (await ctx.state.em.count(User, { [field]: value, id: { $ne: user.id } })) > 0;
  for (const field of ['username', 'email'] as const) {
    if (attributes[field] !== undefined && (await taken(field, user[field])))
      throw invalidAttribute(`/data/attributes/${field}`, `${field} has already been taken`);
  }
  await uniqueAs('/data/attributes', 'username or email', () => ctx.state.em.flush());
  respond(ctx, 200, single(serializeUser(user, true)));
}

/**
 * A user the caller may see: themself, anyone for the site admin, or a member of an organization the
 * caller reaches. Anyone else is the same 404 as nobody.
 */
async function visibleUser(ctx: ApiContext): Promise<User> {
  const id = ctx.params['user_id'] ?? '';
  const principal = ctx.state.principal;
  if (principal.kind === 'admin' || personOf(principal) === id) return orNotFound(await ctx.state.em.findOne(User, { id }));
  const organizations = organizationsWhere(principal, () => true) ?? [];
  if (organizations.length === 0) throw new ApiError(404, 'not found');
  const membership = await ctx.state.em.findOne(
    OrganizationMembership,
    { user: id, organization: { $in: organizations } },
    { populate: ['user'] },
  );
  return orNotFound(membership?.user);
}

async function show(ctx: ApiContext): Promise<void> {
  const user = await visibleUser(ctx);
  respond(ctx, 200, single(serializeUser(user, ctx.state.principal.kind === 'admin' || personOf(ctx.state.principal) === user.id)));
}

/** Only their user and the site admin see and make a user's tokens; another user's list is empty, as in HCP. */
const mayManageTokens = (principal: Principal, user: User): boolean => principal.kind === 'admin' || personOf(principal) === user.id;

async function listTokens(ctx: ApiContext): Promise<void> {
  const user = await visibleUser(ctx);
  const page = parsePage(ctx.query);
  const [tokens, total] = mayManageTokens(ctx.state.principal, user)
    ? await ctx.state.em.findAndCount(
        ApiToken,
        { kind: 'user', user: user.id, revokedAt: null },
        { orderBy: { createdAt: 'asc', id: 'asc' }, limit: page.size, offset: page.offset },
      )
    : [[], 0];
  respond(ctx, 200, tokenCollection(tokens, page, total, publicRequestUrl(ctx)));
}

async function createToken(ctx: ApiContext): Promise<void> {
  const user = await visibleUser(ctx);
  if (!mayManageTokens(ctx.state.principal, user)) throw new ApiError(404, 'not found');
  const attributes = parseTokenAttributes(ctx.request.body);
  const { token, secret } = await issueToken(ctx.state.em, ctx.deps.secrets, {
    kind: 'user',
    userId: user.id,
    description: attributes.description ?? null,
    expiresAt: expiryOf(attributes['expired-at']),
    createdBy: actorId(ctx.state.principal),
  });
  principalsChanged(ctx);
  respond(ctx, 201, single(serializeToken(token, secret)));
}

export const userRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/account/details',
    auth: 'token',
    summary: "The caller's user (a service user for team, organization and admin tokens)",
    handler: details,
  },
  {
    method: 'PATCH',
    path: '/account/update',
    auth: 'token',
    summary: "Change the caller's username or email address (people only)",
    requestSchema: updateSchema,
    handler: update,
  },
  {
    method: 'GET',
    path: '/users/:user_id',
    auth: 'token',
    summary: "A user's public fields (all of them for themself and the site admin)",
    handler: show,
  },
  {
    method: 'GET',
    path: '/users/:user_id/authentication-tokens',
    auth: 'token',
    summary: "List a user's tokens (their own; empty for another user's)",
    query: { page: true },
    handler: listTokens,
  },
  {
    method: 'POST',
    path: '/users/:user_id/authentication-tokens',
    auth: 'token',
    summary: 'Create a user token (for themself, or by the site admin; the secret is shown once)',
    requestSchema: tokenCreateSchema,
    optionalBody: true,
    handler: createToken,
  },
];
