import type { FilterQuery } from '@mikro-orm/core';
import { invalidAttribute, notFound } from '@runtasks/shared/errors';
import { FEATURE_SETS, findFeatureSets, type FeatureSet } from '@runtasks/shared/domain';
import { Organization } from '@runtasks/shared/db';
import { z } from 'zod';
import { isAdmin } from '../auth/principal.ts';
import type { ApiContext } from '../context.ts';
import { parseWith } from '../http/body.ts';
import { selfLink, single, toOne, type Resource } from '../http/jsonapi.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { orNotFound, publicRequestUrl, respond, type RouteDef } from './define.ts';
import { identifier } from './schemas.ts';

function serializeFeatureSet(set: FeatureSet): Resource {
  const free = set.edition === 'free';
  return {
    id: set.id,
    type: 'feature-sets',
    attributes: {
      name: set.name,
      'run-tasks': true,
      'run-task-limit': free ? 1 : null,
      'run-task-workspace-limit': free ? 10 : null,
      'global-run-tasks': set.globalRunTasks,
      'private-run-tasks': false,
    },
    links: selfLink(`/admin/feature-sets/${set.id}`),
  };
}

/** go-tfe sends type `subscription` (singular); attributes such as runs-ceiling are accepted and ignored. */
const subscriptionSchema = z.object({
  data: z.object({
    type: z.enum(['subscription', 'subscriptions'], { error: 'must be "subscriptions"' }),
    attributes: z.record(z.string(), z.unknown()).optional(),
    relationships: z.object({ 'feature-set': z.object({ data: identifier('feature-sets') }) }),
  }),
});

function requireAdmin(ctx: ApiContext): void {
  if (!isAdmin(ctx.state.principal)) throw notFound();
}

async function listFeatureSets(ctx: ApiContext): Promise<void> {
  requireAdmin(ctx);
  const page = parsePage(ctx.query);
  const query = typeof ctx.query['q'] === 'string' ? ctx.query['q'] : undefined;
  const sets = findFeatureSets(query);
  const resources = sets.slice(page.offset, page.offset + page.size).map(serializeFeatureSet);
  respond(ctx, 200, collection(resources, page, sets.length, publicRequestUrl(ctx)));
}

async function subscribe(ctx: ApiContext): Promise<void> {
  requireAdmin(ctx);
  const where = { name: ctx.params['organization_name'] ?? '' } as FilterQuery<Organization>;
  const organization = orNotFound(await ctx.state.em.findOne(Organization, where));
  const { relationships } = parseWith(subscriptionSchema, ctx.request.body).data;
  const set = FEATURE_SETS.find((candidate) => candidate.id === relationships['feature-set'].data.id);
  if (!set) throw invalidAttribute('/data/relationships/feature-set/data/id', 'No feature set has this id.');
  organization.edition = set.edition;
  organization.globalRunTasksEnabled = set.globalRunTasks;
  await ctx.state.em.flush();
  respond(
    ctx,
    201,
    single({
      id: `sub-${organization.id.slice('org-'.length)}`,
      type: 'subscriptions',
      attributes: { 'is-active': true, 'is-public-free-tier': set.edition === 'free' },
      relationships: { organization: toOne('organizations', organization.name), 'feature-set': toOne('feature-sets', set.id) },
    }),
  );
}

export const adminRoutes: RouteDef[] = [
  {
    method: 'GET',
    path: '/admin/feature-sets',
    auth: 'token',
    summary: 'List feature sets (site admin)',
    query: { page: true, params: ['q'] },
    handler: listFeatureSets,
  },
  {
    method: 'POST',
    path: '/admin/organizations/:organization_name/subscription',
    auth: 'token',
    summary: "Set an organization's feature set (site admin)",
    requestSchema: subscriptionSchema,
    handler: subscribe,
  },
];
