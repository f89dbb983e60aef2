import { invalidParameter } from '@runtasks/shared/errors';
import { RUN_STATUSES } from '@runtasks/shared/domain';
import { Workspace } from '@runtasks/shared/db';
import { readableWorkspaceParams, WORKSPACE_ROW, workspaceAccessSql } from '../auth/scopes.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { collection, parsePage } from '../http/pagination.ts';
import { publicRequestUrl, respond, type RouteQuery } from './define.ts';
import { findOrganization } from '../services/organization.service.ts';
import { parseWorkspaceIncludes, WORKSPACE_INCLUDES, workspaceDocuments } from './workspace-documents.ts';

/** HCP's sort keys for the workspace list; a leading `-` reverses. Workspaces without a current run come last either way. */
const SORTS = {
  name: 'w.name asc',
  '-name': 'w.name desc',
  'current-run.created-at': 'cr.created_at asc nulls last, w.name asc',
  '-current-run.created-at': 'cr.created_at desc nulls last, w.name asc',
} as const;

export const WORKSPACE_LIST_QUERY: RouteQuery = {
  page: true,
  include: WORKSPACE_INCLUDES,
  params: ['sort', 'search[name]', 'search[wildcard-name]', 'search[tags]', 'search[exclude-tags]', 'filter[current-run][status]'],
};

type Query = Record<string, string | string[] | undefined>;

function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw invalidParameter(name, `${name} must be given at most once.`);
  return value === '' ? undefined : value;
}

const likeEscaped = (text: string): string => text.replace(/[\\%_]/g, (character) => `\\${character}`);

const TAGGED = 'wt.workspace_id = w.id';
/** The distinct names of a comma-separated list, blanks around them ignored. */
const tagNames = (list: string | undefined): string[] => [
  ...new Set(
    (list ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => name !== ''),
  ),
];

/** The conditions after organization and access ($1-$3), each with its parameter, in order. */
function filters(query: Query): { sql: string[]; values: unknown[] } {
  const sql: string[] = [];
  const values: unknown[] = [];
  const add = (condition: (param: string) => string, value: unknown) => {
    values.push(value);
    sql.push(condition(`$${values.length + 3}`));
  };
  const search = single(query, 'search[name]');
  if (search !== undefined) add((param) => `w.name ilike ${param} escape '\\'`, `%${likeEscaped(search)}%`);
  const wildcard = single(query, 'search[wildcard-name]');
  if (wildcard !== undefined) add((param) => `w.name ilike ${param} escape '\\'`, likeEscaped(wildcard).replaceAll('*', '%'));
  // Comma-separated tag names: the workspace must have every one of `search[tags]` and none of `search[exclude-tags]`.
  const tags = tagNames(single(query, 'search[tags]'));
  if (tags.length > 0)
    add(
      (param) =>
        `(select count(*) from workspace_tags wt join tags t on t.id = wt.tag_id where ${TAGGED} and t.name = any(${param}::text[])) = ${tags.length}`,
      tags,
    );
  const excluded = tagNames(single(query, 'search[exclude-tags]'));
  if (excluded.length > 0)
    add(
      (param) =>
        `not exists (select 1 from workspace_tags wt join tags t on t.id = wt.tag_id where ${TAGGED} and t.name = any(${param}::text[]))`,
      excluded,
    );
  const status = single(query, 'filter[current-run][status]');
  if (status !== undefined) {
    const statuses = status.split(',');
    const unknown = statuses.find((value) => !(RUN_STATUSES as readonly string[]).includes(value));
    if (unknown !== undefined) throw invalidParameter('filter[current-run][status]', `'${unknown}' is not a run status.`);
    add((param) => `cr.status = any(${param}::text[])`, statuses);
  }
  return { sql, values };
}

function sortOf(query: Query): string {
  const sort = single(query, 'sort') ?? 'name';
  if (!Object.hasOwn(SORTS, sort)) {
    throw invalidParameter('sort', `sort must be one of ${Object.keys(SORTS).join(', ')}; got '${sort}'.`);
  }
  return SORTS[sort as keyof typeof SORTS];
}

/**
 * The organization's workspaces the caller may read, filtered, sorted and paginated in one statement,
 * then loaded as entities for the page only. The current run is the latest run that is not plan-only.
 */
export async function listWorkspaces(ctx: ApiContext): Promise<void> {
  const query = ctx.query as Query;
  const include = parseWorkspaceIncludes(ctx);
  const page = parsePage(query);
  const order = sortOf(query);
  const where = filters(query);
  const organization = await findOrganization(ctx);
  const [scopeOrganization, team] = readableWorkspaceParams(ctx.state.principal, 'read');
  const base = `from workspaces w
    left join lateral (select r.created_at, r.status from runs r where r.workspace_id = w.id and not r.plan_only
                        order by r.created_at desc, r.id desc limit 1) cr on true
   where w.organization_id = $1 and ${workspaceAccessSql(WORKSPACE_ROW, 2, 3, 'read')} ${where.sql.map((condition) => `and ${condition}`).join(' ')}`;
  const params = [organization.id, scopeOrganization, team, ...where.values];
  const pool = await poolOf(ctx);
  const count = await pool.query<{ total: number }>(`select count(*)::int as total ${base}`, params);
  const ids = await pool.query<{ id: string }>(
    `select w.id ${base} order by ${order}, w.id limit $${params.length + 1} offset $${params.length + 2}`,
    [...params, page.size, page.offset],
  );
  const pageIds = ids.rows.map((row) => row.id);
  const loaded = await ctx.state.em.find(Workspace, { id: { $in: pageIds } }, { populate: ['organization'] });
  const workspaces = pageIds.flatMap((id) => loaded.filter((workspace) => workspace.id === id));
  const { data, included } = await workspaceDocuments(ctx, workspaces, include);
  respond(ctx, 200, collection(data, page, count.rows[0]?.total ?? 0, publicRequestUrl(ctx), included));
}
