import type { FilterQuery } from '@mikro-orm/core';
import { invalidParameter, notFound } from '@runtasks/shared/errors';
import { inLongTransaction, Organization } from '@runtasks/shared/db';
import { principalsChanged } from '../auth/authenticate.ts';
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

/** `q`: organizations whose name or email contains the text, in any case (HCP's search). */
export function organizationSearch(query: ApiContext['query']): Record<string, unknown> {
  const q = query['q'];
  if (q === undefined || q === '') return {};
  if (typeof q !== 'string') throw invalidParameter('q', 'q must be given at most once.');
  if (q.length > 255) throw invalidParameter('q', 'q must be at most 255 characters.');
  // The text is matched as text: LIKE's wildcards and its escape character are escaped.
  const pattern = `%${q.replace(/[\\%_]/g, (match) => `\\${match}`)}%`;
  return { $or: [{ name: { $ilike: pattern } }, { email: { $ilike: pattern } }] };
}

/** Deletes the organization and everything it owns, however much: no statement timeout, only a lock timeout. */
export async function deleteOrganization(ctx: ApiContext, organization: Organization): Promise<void> {
  await inLongTransaction(ctx.state.em, ctx.deps.config.databaseStatementTimeoutMs, (tx) =>
    tx.nativeDelete(Organization, { id: organization.id }),
  );
  // Its tokens and teams went with it.
  principalsChanged(ctx);
}
