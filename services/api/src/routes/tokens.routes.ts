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
import { audit } from '../services/audit.service.ts';
import { findAuditTrailToken, issueAuditTrailToken, revokeAuditTrailToken } from '../services/audit-trail.service.ts';
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

export const tokenCreateSchema = z.object({
  data: z.object({
    type: z.enum(TOKEN_DOCUMENT_TYPES),
    id: z.string().optional(),
    attributes: tokenAttributes,
    relationships: noRelationships,
  }),
});

type TokenAttributes = z.output<typeof tokenCreateSchema>['data']['attributes'];

/**
 * No body, `{}`, or a document. Not a zod union: a union reports its failure at "/", hiding the
 * offending attribute's pointer.
 */
export function parseTokenAttributes(body: unknown): TokenAttributes {
  if (body === undefined || (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0))
    return {};
  return parseWith(tokenCreateSchema, body).data.attributes;
}

/** HCP's `?token=audit-trails`: the organization's audit trail token instead of its organization token. */
const AUDIT_TRAILS = 'audit-trails';

/**
 * Which token `?token=` names: none (the owner's own token) or, for an organization, its audit trail
 * token. Any other value is refused by name rather than answered with the ordinary token.
 */
function tokenKindOf(ctx: ApiContext, owner: TokenOwner): 'own' | 'audit-trails' {
  const kind = ctx.query['token'];
  if (kind === undefined) return 'own';
  if (owner.kind === 'organization' && kind === AUDIT_TRAILS) return 'audit-trails';
  const shown = Array.isArray(kind) ? kind.join(',') : kind;
  const known = owner.kind === 'organization' ? `the one value taken is ${AUDIT_TRAILS}` : "a team's token takes none";
  throw invalidParameter(
    'token',
    `token=${shown} is not supported: ${known}. Leave out the token parameter for the ${owner.kind} token.`,
    400,
  );
}

export function expiryOf(value: string | null | undefined): Date | null {
  if (!value) return null;
  return new Date(value);
}

/** The owner of a token: an organization (owner rights) or a team (the team's rights). One active token each. */
interface TokenOwner {
  kind: 'organization' | 'team';
  path: string;
  /** The owner's filter on api_tokens, found inside the caller's owner scope (404 otherwise), and its organization's id. */
  find(ctx: ApiContext): Promise<{ filter: { organization: string } | { team: string }; organizationId: string }>;
}

const organizationOwner: TokenOwner = {
  kind: 'organization',
  path: '/organizations/:organization_name/authentication-token',
  async find(ctx) {
    const { id } = await findOrganization(ctx, true);
    return { filter: { organization: id }, organizationId: id };
  },
};

const teamOwner: TokenOwner = {
  kind: 'team',
  path: '/teams/:team_id/authentication-token',
  async find(ctx) {
    const scope = ownerOrganizationScope(ctx.state.principal);
    const where = { id: ctx.params['team_id'] ?? '', organization: scope } as FilterQuery<Team>;
    const team = orNotFound(scope && (await ctx.state.em.findOne(Team, where)));
    return { filter: { team: team.id }, organizationId: team.organization.id };
  },
};

function tokenRoutesFor(owner: TokenOwner): RouteDef[] {
  const create = async (ctx: ApiContext): Promise<void> => {
    const kind = tokenKindOf(ctx, owner);
    const { filter: ownerFilter, organizationId } = await owner.find(ctx);
    const attributes = parseTokenAttributes(ctx.request.body);
    if (kind === AUDIT_TRAILS) {
      const issued = await issueAuditTrailToken(ctx.state.em, ctx.deps.secrets, {
        organizationId: organizationId,
        description: attributes.description ?? null,
        expiresAt: expiryOf(attributes['expired-at']),
        createdBy: actorId(ctx.state.principal),
      });
      await audit(ctx, organizationId, { type: 'audit_trail_token', id: issued.token.id }, 'create', { replaced: issued.replaced });
      respond(ctx, 201, single(serializeToken(issued.token, issued.secret)));
      return;
    }
    const { token, secret } = await issueToken(ctx.state.em, ctx.deps.secrets, {
      kind: owner.kind,
      organizationId: 'organization' in ownerFilter ? organizationId : undefined,
      teamId: 'team' in ownerFilter ? ownerFilter.team : undefined,
      description: attributes.description ?? null,
      expiresAt: expiryOf(attributes['expired-at']),
      createdBy: actorId(ctx.state.principal),
    });
    // The previous token of its owner was revoked with it.
    principalsChanged(ctx);
    await audit(ctx, organizationId, { type: 'authentication_token', id: token.id }, 'create', {
      owner: owner.kind,
      'expired-at': attributes['expired-at'] ?? null,
    });
    respond(ctx, 201, single(serializeToken(token, secret)));
  };
  const show = async (ctx: ApiContext): Promise<void> => {
    const kind = tokenKindOf(ctx, owner);
    const { filter: ownerFilter, organizationId } = await owner.find(ctx);
    if (kind === AUDIT_TRAILS) {
      respond(ctx, 200, single(serializeToken(orNotFound(await findAuditTrailToken(ctx.state.em, organizationId)))));
      return;
    }
    const where = { kind: owner.kind, ...ownerFilter, revokedAt: null } as FilterQuery<ApiToken>;
    respond(ctx, 200, single(serializeToken(orNotFound(await ctx.state.em.findOne(ApiToken, where)))));
  };
  const revoke = async (ctx: ApiContext): Promise<void> => {
    const kind = tokenKindOf(ctx, owner);
    const { filter: ownerFilter, organizationId } = await owner.find(ctx);
    if (kind === AUDIT_TRAILS) {
      const id = orNotFound(await revokeAuditTrailToken(ctx.state.em, organizationId));
      await audit(ctx, organizationId, { type: 'audit_trail_token', id }, 'destroy');
      respond(ctx, 204);
      return;
    }
    const where = { kind: owner.kind, ...ownerFilter, revokedAt: null } as FilterQuery<ApiToken>;
    const token = orNotFound(await ctx.state.em.findOne(ApiToken, where));
    await ctx.state.em.nativeUpdate(ApiToken, { id: token.id, revokedAt: null }, { revokedAt: new Date() });
    principalsChanged(ctx);
    await audit(ctx, organizationId, { type: 'authentication_token', id: token.id }, 'destroy', {
      owner: owner.kind,
    });
    respond(ctx, 204);
  };
  return [
    {
      method: 'POST',
      path: owner.path,
      auth: 'token',
      summary: `Create the ${owner.kind} token (replaces the active one; the secret is shown once)`,
      requestSchema: tokenCreateSchema,
      optionalBody: true,
      handler: create,
    },
    { method: 'GET', path: owner.path, auth: 'token', summary: `Show the active ${owner.kind} token`, handler: show },
    { method: 'DELETE', path: owner.path, auth: 'token', summary: `Revoke the ${owner.kind} token`, handler: revoke },
  ];
}

export const tokenRoutes: RouteDef[] = [...tokenRoutesFor(organizationOwner), ...tokenRoutesFor(teamOwner)];
