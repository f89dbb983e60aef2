import type { FilterQuery, QueryOrderMap } from '@mikro-orm/core';
import { ApiToken } from '@runtasks/shared/db';
import { invalidParameter } from '@runtasks/shared/errors';
import { principalsChanged } from '../auth/authenticate.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { single } from '../http/jsonapi.ts';
import { parsePage } from '../http/pagination.ts';
import { serializeToken, tokenCollection } from '../serializers/token.serializer.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';

/**
 * Tokens by id (`/authentication-tokens/:id`) and an organization's team tokens, as go-tfe's
 * TeamTokens and UserTokens read them. Only active tokens; organization and team tokens only for
 * callers with owner rights on the token's organization, user tokens only for their user and the site
 * admin (anyone else gets the same 404 as for a token that does not exist).
 */
function activeTokenById(ctx: ApiContext): FilterQuery<ApiToken> | null {
  const principal = ctx.state.principal;
  const scope = ownerOrganizationScope(principal);
  const reach: Record<string, unknown>[] = scope
    ? [
        { kind: 'organization', organization: scope },
        { kind: 'team', team: { organization: scope } },
      ]
    : [];
  // User tokens: a person's own, and every one for the site admin.
  const self = principal.kind === 'user' || principal.kind === 'admin' ? principal.userId : undefined;
  if (principal.kind === 'admin') reach.push({ kind: 'user' });
  else if (self) reach.push({ kind: 'user', user: self });
  if (reach.length === 0) return null;
  return { id: ctx.params['token_id'] ?? '', revokedAt: null, $or: reach } as FilterQuery<ApiToken>;
}

async function show(ctx: ApiContext): Promise<void> {
  const where = activeTokenById(ctx);
  respond(ctx, 200, single(serializeToken(orNotFound(where ? await ctx.state.em.findOne(ApiToken, where) : null))));
}

async function revoke(ctx: ApiContext): Promise<void> {
  const where = activeTokenById(ctx);
  const token = orNotFound(where ? await ctx.state.em.findOne(ApiToken, where, { fields: ['id'] }) : null);
  const revoked = await ctx.state.em.nativeUpdate(ApiToken, { id: token.id, revokedAt: null }, { revokedAt: new Date() });
  orNotFound(revoked > 0 ? revoked : null);
  principalsChanged(ctx);
  respond(ctx, 204);
}

const SORTS: Record<string, QueryOrderMap<ApiToken>> = {
  'created-at': { createdAt: 'asc', id: 'asc' },
  '-created-at': { createdAt: 'desc', id: 'desc' },
  'expired-at': { expiresAt: 'asc nulls last', id: 'asc' },
  '-expired-at': { expiresAt: 'desc nulls last', id: 'desc' },
};

function singleParameter(ctx: ApiContext, name: string): string | undefined {
  const value = ctx.query[name];
  if (Array.isArray(value)) throw invalidParameter(name, `${name} must be given at most once.`);
  return value;
}

/** `q`: the team's name contains it, ignoring case (`%` and `_` match only themselves); `sort`: one of SORTS. */
async function listTeamTokens(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const page = parsePage(ctx.query);
  const sort = singleParameter(ctx, 'sort') ?? 'created-at';
  const orderBy = SORTS[sort];
  if (!orderBy) throw invalidParameter('sort', `sort must be one of ${Object.keys(SORTS).join(', ')}.`);
  const q = singleParameter(ctx, 'q');
  const team: Record<string, unknown> = { organization: organization.id };
  if (q) team['name'] = { $ilike: `%${q.replace(/[\\%_]/g, (match) => `\\${match}`)}%` };
  const [tokens, total] = await ctx.state.em.findAndCount(ApiToken, { kind: 'team', revokedAt: null, team } as FilterQuery<ApiToken>, {
    orderBy,
    limit: page.size,
    offset: page.offset,
  });
  respond(ctx, 200, tokenCollection(tokens, page, total, publicRequestUrl(ctx)));
}

export const tokenIdRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/authentication-tokens/:token_id',
    auth: 'token',
    summary: 'Show an organization, team or user token by id',
    handler: show,
  },
  {
    method: 'DELETE',
    path: '/authentication-tokens/:token_id',
    auth: 'token',
    summary: 'Revoke an organization, team or user token by id',
    handler: revoke,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name/team-tokens',
    auth: 'token',
    summary: "List an organization's active team tokens",
    query: { page: true, params: ['q', 'sort'] },
    handler: listTeamTokens,
  },
];
