import type { FilterQuery } from '@mikro-orm/core';
import { ApiError, notFound } from '@runtasks/shared/errors';
import { EDITIONS, newId } from '@runtasks/shared/domain';
import { createOwnersTeam, Organization } from '@runtasks/shared/db';
import { z } from 'zod';
import { organizationPermissions } from '../auth/permissions.ts';
import { isAdmin, isOwnerOf } from '../auth/principal.ts';
import { organizationScope } from '../auth/scopes.ts';
import { audit } from '../services/audit.service.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { parseInclude } from '../http/include.ts';
import { serializeDefaultProject, serializeEntitlementSet, serializeOrganization } from '../serializers/organization.serializer.ts';
import { publicRequestUrl, respond, uniqueAs, type RouteDef } from './define.ts';
import { applyOrganizationSettings, organizationSettings } from './organization-settings.ts';
import { flexibleBoolean, nameSchema, noRelationships, resourceDocument } from './schemas.ts';
import { deleteOrganization, findOrganization, organizationSearch } from '../services/organization.service.ts';
import { addCreator } from '../services/users.service.ts';

const emailSchema = z.email('must be a valid email address').max(255);

const createSchema = resourceDocument(
  'organizations',
  z.object({
    name: nameSchema(40),
    email: emailSchema,
    edition: z.enum(EDITIONS).optional(),
    'task-overrides-enabled': flexibleBoolean.optional(),
    ...organizationSettings,
  }),
  noRelationships,
);

const updateSchema = resourceDocument(
  'organizations',
  z
    .object({
      email: emailSchema.optional(),
      edition: z.enum(EDITIONS).optional(),
      'task-overrides-enabled': flexibleBoolean.optional(),
      name: nameSchema(40).optional(),
      ...organizationSettings,
    })
    .default({}),
  noRelationships,
);

const serializeWithPermissions = (ctx: ApiContext, organization: Organization) =>
  serializeOrganization(organization, organizationPermissions(ctx.state.principal, organization.id));

async function create(ctx: ApiContext): Promise<void> {
  if (!isAdmin(ctx.state.principal)) throw notFound();
  const { attributes } = parseWith(createSchema, ctx.request.body).data;
  const organization = ctx.state.em.create(Organization, {
    id: newId('organization'),
    name: attributes.name,
    email: attributes.email,
    edition: attributes.edition ?? 'standard',
    taskOverridesEnabled: attributes['task-overrides-enabled'] ?? false,
  });
  applyOrganizationSettings(organization, attributes);
  const owners = createOwnersTeam(ctx.state.em, organization);
  // A site admin's own token: that person is the organization's first member and an owner.
  const principal = ctx.state.principal;
  if (principal.kind === 'admin' && principal.userId) addCreator(ctx.state.em, organization, owners, principal.userId);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  respond(ctx, 201, single(serializeWithPermissions(ctx, organization)));
}

async function list(ctx: ApiContext): Promise<void> {
  const page = parsePage(ctx.query);
  const scope = organizationScope(ctx.state.principal) ?? { id: null };
  const where = { ...scope, ...organizationSearch(ctx.query) } as FilterQuery<Organization>;
  const [organizations, total] = await ctx.state.em.findAndCount(Organization, where, {
    orderBy: { createdAt: 'asc', id: 'asc' },
    limit: page.size,
    offset: page.offset,
  });
  respond(
    ctx,
    200,
    collection(
      organizations.map((organization) => serializeWithPermissions(ctx, organization)),
      page,
      total,
      publicRequestUrl(ctx),
    ),
  );
}

async function show(ctx: ApiContext): Promise<void> {
  const include = parseInclude(ctx.query, ['default_project']);
  const organization = await findOrganization(ctx);
  const included = include.has('default_project') ? [serializeDefaultProject(organization)] : [];
  respond(ctx, 200, single(serializeWithPermissions(ctx, organization), included));
}

async function update(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  const { attributes } = parseWith(updateSchema, ctx.request.body).data;
  // The edition is billing, not ownership: only the site admin changes it.
  if (attributes.edition !== undefined && attributes.edition !== organization.edition && !isAdmin(ctx.state.principal)) {
    throw new ApiError(422, 'invalid attribute', 'Only a site administrator can change the edition.', {
      pointer: '/data/attributes/edition',
    });
  }
  if (attributes.email !== undefined) organization.email = attributes.email;
  if (attributes.edition !== undefined) organization.edition = attributes.edition;
  if (attributes['task-overrides-enabled'] !== undefined) organization.taskOverridesEnabled = attributes['task-overrides-enabled'];
  // Everything refers to the organization by its id, so a new name changes nothing else (as in HCP).
  if (attributes.name !== undefined) organization.name = attributes.name;
  applyOrganizationSettings(organization, attributes);
  await uniqueAs('/data/attributes/name', 'name', () => ctx.state.em.flush());
  await audit(ctx, organization.id, { type: 'organization', id: organization.id }, 'update', attributes);
  respond(ctx, 200, single(serializeWithPermissions(ctx, organization)));
}

async function destroy(ctx: ApiContext): Promise<void> {
  const organization = await findOrganization(ctx, true);
  if (!isOwnerOf(ctx.state.principal, organization.id)) throw notFound();
  await deleteOrganization(ctx, organization);
  respond(ctx, 204);
}

async function entitlementSet(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(serializeEntitlementSet(await findOrganization(ctx), Boolean(ctx.deps.config.oidc))));
}

export const organizationRoutes: RouteDef[] = [
  {
    method: 'POST',
    path: '/organizations',
    auth: 'token',
    summary: 'Create an organization (site admin)',
    requestSchema: createSchema,
    handler: create,
  },
  {
    method: 'GET',
    path: '/organizations',
    auth: 'token',
    summary: 'List organizations',
    query: { page: true, params: ['q'] },
    handler: list,
  },
  {
    method: 'GET',
    path: '/organizations/:organization_name',
    auth: 'token',
    summary: 'Show an organization',
    query: { include: ['default_project'] },
    handler: show,
  },
  {
    method: 'PATCH',
    path: '/organizations/:organization_name',
    auth: 'token',
    summary: 'Update an organization',
    requestSchema: updateSchema,
    handler: update,
  },
  { method: 'DELETE', path: '/organizations/:organization_name', auth: 'token', summary: 'Delete an organization', handler: destroy },
  {
    method: 'GET',
    path: '/organizations/:organization_name/entitlement-set',
    auth: 'token',
    summary: "Show an organization's entitlements",
    handler: entitlementSet,
  },
];
