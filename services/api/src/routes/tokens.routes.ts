import type { FilterQuery } from '@mikro-orm/core';
import { invalidParameter } from '@runtasks/shared/errors';
import { ApiToken, Team } from '@runtasks/shared/db';
import { z } from 'zod';
import { actorId } from '../auth/actor.ts';
import { ownerOrganizationScope } from '../auth/scopes.ts';
import { principalsChanged } from '../auth/authenticate.ts';
import { issueToken } from '../auth/tokens.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { serializeToken } from '../serializers/token.serializer.ts';
import { orNotFound, respond, type RouteDef } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';
import { noRelationships, safeText } from './schemas.ts';

/**
 * The types a token's create document may name: go-tfe sends `""`, HCP's documentation says
 * `authentication-token`, and the responses' own type is `authentication-tokens`. Any of them is the same request.
 */
export const TOKEN_DOCUMENT_TYPES = ['', 'authentication-token', 'authentication-tokens'] as const;

const tokenAttributes = z
  .object({
    description: safeText(255).nullable().optional(),
    'expired-at': z.iso
      .datetime({ offset: true })
      .refine((value) => Date.parse(value) > Date.now(), 'must be in the future')
      .nullable()
      .optional(),
  })
  .default({});

const createSchema = z.object({
  data: z.object({
    type: z.enum(TOKEN_DOCUMENT_TYPES),
    id: z.string().optional(),
    attributes: tokenAttributes,
    relationships: noRelationships,
  }),
});

type TokenAttributes = z.output<typeof createSchema>['data']['attributes'];

/**
 * No body, `{}`, or a document. Not a zod union: a union reports its failure at "/", hiding the
 * offending attribute's pointer.
 */
function parseTokenAttributes(body: unknown): TokenAttributes {
  if (body === undefined || (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0))
    return {};
  return parseWith(createSchema, body).data.attributes;
}

/**
 * HCP's `?token=audit-trails` addresses an organization's audit trail token. There is no audit trail
 * here, so any `token` parameter is refused by name rather than answered with the ordinary token.
 */
function refuseTokenKind(ctx: ApiContext): void {
  const kind = ctx.query['token'];
  if (kind === undefined) return;
  const shown = Array.isArray(kind) ? kind.join(',') : kind;
  throw invalidParameter(
    'token',
    `token=${shown} is not supported: this service has no audit trail, so it issues no audit trail tokens. Leave out the token parameter.`,
    400,
  );
}

function expiryOf(value: string | null | undefined): Date | null {
  if (!value) return null;
  return new Date(value);
}

/** The owner of a token: an organization (owner rights) or a team (the team's rights). One active token each. */
interface TokenOwner {
  kind: 'organization' | 'team';
  path: string;
  /** The owner's filter on api_tokens, found inside the caller's owner scope (404 otherwise). */
  find(ctx: ApiContext): Promise<{ organization: string } | { team: string }>;
}

const organizationOwner: TokenOwner = {
  kind: 'organization',
  path: '/organizations/:organization_name/authentication-token',
  find: async (ctx) => ({ organization: (await findOrganization(ctx, true)).id }),
};

const teamOwner: TokenOwner = {
  kind: 'team',
  path: '/teams/:team_id/authentication-token',
  async find(ctx) {
    const scope = ownerOrganizationScope(ctx.state.principal);
    const where = { id: ctx.params['team_id'] ?? '', organization: scope } as FilterQuery<Team>;
    return { team: orNotFound(scope && (await ctx.state.em.findOne(Team, where))).id };
  },
};

function tokenRoutesFor(owner: TokenOwner): RouteDef[] {
  const create = async (ctx: ApiContext): Promise<void> => {
    refuseTokenKind(ctx);
    const ownerFilter = await owner.find(ctx);
    const attributes = parseTokenAttributes(ctx.request.body);
    const { token, secret } = await issueToken(ctx.state.em, ctx.deps.secrets, {
      kind: owner.kind,
      organizationId: 'organization' in ownerFilter ? ownerFilter.organization : undefined,
      teamId: 'team' in ownerFilter ? ownerFilter.team : undefined,
      description: attributes.description ?? null,
      expiresAt: expiryOf(attributes['expired-at']),
      createdBy: actorId(ctx.state.principal),
    });
    // The previous token of its owner was revoked with it.
    principalsChanged(ctx);
    respond(ctx, 201, single(serializeToken(token, secret)));
  };
  const show = async (ctx: ApiContext): Promise<void> => {
    refuseTokenKind(ctx);
    const where = { kind: owner.kind, ...(await owner.find(ctx)), revokedAt: null } as FilterQuery<ApiToken>;
    respond(ctx, 200, single(serializeToken(orNotFound(await ctx.state.em.findOne(ApiToken, where)))));
  };
  const revoke = async (ctx: ApiContext): Promise<void> => {
    refuseTokenKind(ctx);
    const where = { kind: owner.kind, ...(await owner.find(ctx)), revokedAt: null } as FilterQuery<ApiToken>;
    const revoked = await ctx.state.em.nativeUpdate(ApiToken, where, { revokedAt: new Date() });
    orNotFound(revoked > 0 ? revoked : null);
    principalsChanged(ctx);
    respond(ctx, 204);
  };
  return [
    {
      method: 'POST',
      path: owner.path,
      auth: 'token',
      summary: `Create the ${owner.kind} token (replaces the active one; the secret is shown once)`,
      requestSchema: createSchema,
      optionalBody: true,
      handler: create,
    },
    { method: 'GET', path: owner.path, auth: 'token', summary: `Show the active ${owner.kind} token`, handler: show },
    { method: 'DELETE', path: owner.path, auth: 'token', summary: `Revoke the ${owner.kind} token`, handler: revoke },
  ];
}

export const tokenRoutes: RouteDef[] = [...tokenRoutesFor(organizationOwner), ...tokenRoutesFor(teamOwner)];
