import { Run } from '@runtasks/shared/db';
import { readableWorkspaceParams, readableWorkspaceSql } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import type { Page } from '../http/pagination.ts';
import { organizationRunConditions } from '../routes/run-list.ts';

type Query = Record<string, string | string[] | undefined>;

/** The columns of `runs` (not aliased: the filters name its columns bare) that the read scope checks. */
const RUNS_TABLE = { organizationId: 'runs.organization_id', workspaceId: 'runs.workspace_id' };

/**
 * One page of an organization's runs that the caller may read, newest first, matching HCP's filters:
 * one statement finds the page's ids (the read scope, the filters and the page in it, on the
 * organization's index), one loads those runs. Not counted, as HCP's list is not: `hasNext` says
 * whether a run lies past the page (one more is read than shown).
 */
export async function findOrganizationRunPage(
  ctx: ApiContext,
  organizationId: string,
  query: Query,
  page: Page,
): Promise<{ runs: Run[]; hasNext: boolean }> {
  const conditions = organizationRunConditions(query);
  const [scopeOrganization, scopeTeam] = readableWorkspaceParams(ctx.state.principal, 'runs:read');
  const params: unknown[] = [organizationId, scopeOrganization, scopeTeam, ...conditions.params, page.size + 1, page.offset];
  let next = 3;
  const numbered = (sql: string): string => sql.replaceAll('?', () => `$${++next}`);
  const where = ['runs.organization_id = $1', readableWorkspaceSql(RUNS_TABLE, 2, 3), ...conditions.sql.map(numbered)].join(' and ');
  const limit = numbered('limit ? offset ?');
  const { rows } = await (
    await poolOf(ctx)
  ).query<{ id: string }>(`select id from runs where ${where} order by created_at desc, id desc ${limit}`, params);
  const ids = rows.slice(0, page.size).map((row) => row.id);
  const runs = ids.length === 0 ? [] : await ctx.state.em.find(Run, { id: { $in: ids } }, { populate: ['workspace'] });
  runs.sort((a, b) => ids.indexOf(a.id) - ids.indexOf(b.id));
  return { runs, hasNext: rows.length > page.size };
}
