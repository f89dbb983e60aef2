import type { FilterQuery } from '@mikro-orm/core';
import { invalidAttribute, notFound } from '@runtasks/shared/errors';
import { isWorkerTimeout } from '@runtasks/shared/domain';
import { Organization } from '@runtasks/shared/db';
import { z } from 'zod';
import { isAdmin } from '../auth/principal.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { parseInclude } from '../http/include.ts';
import { single } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { serializeAdminOrganization } from '../serializers/admin-organization.serializer.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { deleteOrganization, organizationSearch } from '../services/organization.service.ts';
import { flexibleBoolean, noRelationships } from './schemas.ts';

const timeout = z.string().refine(isWorkerTimeout, 'must be a duration in hours, minutes and seconds, such as "24h" or "1h30m"');

/**
 * The site admin's settings of an organization. Disabling an organization and limiting its workspaces
 * would need the service to refuse its tokens and its new workspaces, which it does not do: so only the
 * values that change nothing (`false`, `null`) are accepted, never one that would be stored and ignored.
 */
const updateSchema = z.object({
  data: z.object({
    // go-tfe's admin update options have no type, so it sends `""`.
    type: z.enum(['organizations', ''], { message: 'must be "organizations"' }),
    id: z.string().optional(),
    attributes: z
      .object({
        'access-beta-tools': flexibleBoolean.optional(),
        'global-module-sharing': flexibleBoolean.optional(),
        'global-provider-sharing': flexibleBoolean.optional(),
        'is-disabled': flexibleBoolean
          .refine((value) => !value, 'cannot be true: disabling an organization is not available (its tokens would keep working)')
          .optional(),
        'workspace-limit': z.null({ message: 'must be null: workspace limits are not available (they would not be enforced)' }).optional(),
        'terraform-build-worker-apply-timeout': timeout.optional(),
        'terraform-build-worker-plan-timeout': timeout.optional(),
        'apply-timeout': timeout.optional(),
        'plan-timeout': timeout.optional(),
        'terraform-worker-sudo-enabled': flexibleBoolean.optional(),
      })
      .default({}),
    relationships: noRelationships,
  }),
});

type AdminAttributes = z.output<typeof updateSchema>['data']['attributes'];

function requireAdmin(ctx: ApiContext): void {
  if (!isAdmin(ctx.state.principal)) throw notFound();
}

async function findByName(ctx: ApiContext): Promise<Organization> {
  requireAdmin(ctx);
  const where = { name: ctx.params['organization_name'] ?? '' } as FilterQuery<Organization>;
  return orNotFound(await ctx.state.em.findOne(Organization, where));
}

/** One of a timeout's two names, or the other; both given must agree (they are one setting). */
function oneTimeout(attributes: AdminAttributes, older: keyof AdminAttributes, newer: keyof AdminAttributes): string | undefined {
  const [a, b] = [attributes[older], attributes[newer]] as (string | undefined)[];
  if (a !== undefined && b !== undefined && a !== b)
    throw invalidAttribute(`/data/attributes/${newer}`, `${newer} and ${older} are one setting: give them the same value.`);
  return a ?? b;
}

async function list(ctx: ApiContext): Promise<void> {
  requireAdmin(ctx);
  // HCP's `owners` include lists the owners' user accounts: there are no user accounts here.
  parseInclude(ctx.query, []);
  const page = parsePage(ctx.query);
  const [organizations, total] = await ctx.state.em.findAndCount(Organization, organizationSearch(ctx.query) as FilterQuery<Organization>, {
    orderBy: { createdAt: 'asc', id: 'asc' },
    limit: page.size,
    offset: page.offset,
  });
  respond(ctx, 200, collection(organizations.map(serializeAdminOrganization), page, total, publicRequestUrl(ctx)));
}

async function show(ctx: ApiContext): Promise<void> {
  respond(ctx, 200, single(serializeAdminOrganization(await findByName(ctx))));
}

async function update(ctx: ApiContext): Promise<void> {
  const organization = await findByName(ctx);
  const { attributes } = parseWith(updateSchema, ctx.request.body).data;
  const applyTimeout = oneTimeout(attributes, 'terraform-build-worker-apply-timeout', 'apply-timeout');
  const planTimeout = oneTimeout(attributes, 'terraform-build-worker-plan-timeout', 'plan-timeout');
  if (attributes['access-beta-tools'] !== undefined) organization.accessBetaTools = attributes['access-beta-tools'];
  if (attributes['global-module-sharing'] !== undefined) organization.globalModuleSharing = attributes['global-module-sharing'];
  if (attributes['global-provider-sharing'] !== undefined) organization.globalProviderSharing = attributes['global-provider-sharing'];
  if (attributes['terraform-worker-sudo-enabled'] !== undefined)
    organization.terraformWorkerSudoEnabled = attributes['terraform-worker-sudo-enabled'];
  if (applyTimeout !== undefined) organization.terraformBuildWorkerApplyTimeout = applyTimeout;
  if (planTimeout !== undefined) organization.terraformBuildWorkerPlanTimeout = planTimeout;
  await ctx.state.em.flush();
  respond(ctx, 200, single(serializeAdminOrganization(organization)));
}

async function destroy(ctx: ApiContext): Promise<void> {
  await deleteOrganization(ctx, await findByName(ctx));
  respond(ctx, 204);
}

const PATH = '/admin/organizations/:organization_name';

export const adminOrganizationRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/admin/organizations',
    auth: 'token',
    summary: 'List every organization (site admin)',
    // No include is served (HCP's `owners` are user accounts): any is a 400.
    query: { page: true, include: [], params: ['q'] },
    handler: list,
  },
  { method: 'GET', path: PATH, auth: 'token', summary: 'Show an organization (site admin)', handler: show },
  {
    method: 'PATCH',
    path: PATH,
    auth: 'token',
    summary: "Update an organization's site admin settings",
    requestSchema: updateSchema,
    handler: update,
  },
  { method: 'DELETE', path: PATH, auth: 'token', summary: 'Delete an organization (site admin)', handler: destroy },
];
