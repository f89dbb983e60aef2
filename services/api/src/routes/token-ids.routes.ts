import type { FilterQuery, QueryOrderMap } from '@mikro-orm/core';
import { ApiToken } from '@runtasks/shared/db';
import { invalidParameter } from '@runtasks/shared/errors';
import { principalsChanged } from '../auth/authenticate.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeToken } from '../serializers/token.serializer.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';

/**
 * Organization and team tokens by id (`/authentication-tokens/:id`) and an organization's team tokens,
 * as go-tfe's TeamTokens reads them. Only active tokens; only for callers with owner rights on the
 * token's organization (anyone else gets the same 404 as for a token that does not exist).
 */
function activeTokenById(ctx: ApiContext): FilterQuery<ApiToken> | null {
  const scope = ownerOrganizationScope(ctx.state.principal);
  if (!scope) return null;
  return {
    id: ctx.params['token_id'] ?? '',
    revokedAt: null,
    $or: [
      { kind: 'organization', organization: scope },
      { kind: 'team', team: { organization: scope } },
    ],
  } as FilterQuery<ApiToken>;
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
  respond(
    ctx,
    200,
    collection(
      tokens.map((token) => serializeToken(token)),
      page,
      total,
      publicRequestUrl(ctx),
    ),
  );
}

export const tokenIdRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/authentication-tokens/:token_id',
    auth: 'token',
    summary: 'Show an organization or team token by id',
    handler: show,
  },
  {
    method: 'DELETE',
    path: '/authentication-tokens/:token_id',
    auth: 'token',
    summary: 'Revoke an organization or team token by id',
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
