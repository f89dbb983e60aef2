import type { FilterQuery } from '@mikro-orm/core';
import { notFound } from '@runtasks/shared/errors';
import { Organization } from '@runtasks/shared/db';
import { organizationScope, ownerOrganizationScope } from '../auth/scopes.ts';
import type { ApiContext } from '../context.ts';

/** Looks the organization up by name inside the caller's scope: missing and forbidden are the same 404. */
export async function findOrganization(ctx: ApiContext, owner = false): Promise<Organization> {
  const scope = owner ? ownerOrganizationScope(ctx.state.principal) : organizationScope(ctx.state.principal);
  const name = ctx.params['organization_name'] ?? '';
  const organization = scope && (await ctx.state.em.findOne(Organization, { ...scope, name } as FilterQuery<Organization>));
  if (!organization) throw notFound();
  return organization;
}
