import type { EntityManager } from '@mikro-orm/postgresql';
import { invalidParameter } from '@runtasks/shared/errors';
import { Run } from '@runtasks/shared/db';
import { RUN_OPERATIONS, RUN_STATUS_GROUPS, statusesOfGroup, type RunStatusGroup } from '@runtasks/shared/domain';

type Query = Record<string, string | string[] | undefined>;

/** HCP's run list filters this service can answer; what they mean is in docs/go-tfe.md ("Runs"). */
export const RUN_LIST_PARAMS = [
  'filter[status]',
  'filter[source]',
  'filter[operation]',
  'search[basic]',
  'search[user]',
  'search[commit]',
] as const;

/** The organization list's filters beyond the workspace list's (docs/go-tfe.md, "Runs"). */
export const ORGANIZATION_RUN_LIST_PARAMS = [
  ...RUN_LIST_PARAMS,
  'filter[status_group]',
  'filter[workspace_names]',
  'filter[agent_pool_names]',
  'filter[timeframe]',
] as const;

/** The operation a run is filed under, in SQL: run-options.ts's runOperation, on the stored row. */
const OPERATION_SQL = `case when coalesce((options->>'savePlan')::boolean, false) then 'save_plan'
  when plan_only then 'plan_only' when coalesce((options->>'refreshOnly')::boolean, false) then 'refresh_only'
  when is_destroy then 'destroy' when coalesce((options->>'allowEmptyApply')::boolean, false) then 'empty_apply'
  else 'plan_and_apply' end`;

/** A comma-separated list parameter: undefined when absent; given twice or empty is a 422 naming it. */
function listParameter(query: Query, name: string): string[] | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw invalidParameter(name, `${name} must be given at most once.`);
  const values = raw
    .split(',')
    .map((value) => value.trim())
    .filter((value) => value !== '');
  if (values.length === 0) throw invalidParameter(name, `${name} must name at least one value.`);
  return values;
}

/** The list's filters as SQL conditions on `runs` and their parameters (`?` placeholders). */
export function runListConditions(query: Query): { sql: string[]; params: unknown[] } {
  const sql: string[] = [];
  const params: unknown[] = [];
  const add = (condition: string, values: string[] | undefined): void => {
    if (values === undefined) return;
    sql.push(condition);
    // As JSON: the query builder would spread an array into one placeholder per value.
    params.push(JSON.stringify(values));
  };
  add('status in (select jsonb_array_elements_text(?::jsonb))', listParameter(query, 'filter[status]'));
  add(`coalesce(options->>'source', 'tfe-api') in (select jsonb_array_elements_text(?::jsonb))`, listParameter(query, 'filter[source]'));
  const operations = listParameter(query, 'filter[operation]');
  const unknown = operations?.find((operation) => !(RUN_OPERATIONS as readonly string[]).includes(operation));
  if (unknown !== undefined)
    throw invalidParameter('filter[operation]', `'${unknown}' is not a run operation; use one of ${RUN_OPERATIONS.join(', ')}.`);
  add(`(${OPERATION_SQL}) in (select jsonb_array_elements_text(?::jsonb))`, operations);
  // Runs here come from the API, never from a VCS commit: a VCS user or commit matches none of them.
  if (listParameter(query, 'search[user]') || listParameter(query, 'search[commit]')) sql.push('false');
  const basic = listParameter(query, 'search[basic]')?.join(',');
  if (basic !== undefined) {
    sql.push(`(id = ? or strpos(lower(message), lower(?)) > 0)`);
    params.push(basic, basic);
  }
  return { sql, params };
}

/**
 * The organization list's own filters as conditions on `runs` (unqualified columns; `?` placeholders):
 * status group, workspace names, agent pools (none here: any matches no run), and HCP's timeframe, a
 * year or `year` (the last twelve months, also when it is not given).
 */
export function organizationRunConditions(query: Query): { sql: string[]; params: unknown[] } {
  const { sql, params } = runListConditions(query);
  const groups = listParameter(query, 'filter[status_group]');
  const unknownGroup = groups?.find((group) => !(RUN_STATUS_GROUPS as readonly string[]).includes(group));
  if (unknownGroup !== undefined)
    throw invalidParameter('filter[status_group]', `'${unknownGroup}' is not a status group; use one of ${RUN_STATUS_GROUPS.join(', ')}.`);
  if (groups) {
    sql.push('status in (select jsonb_array_elements_text(?::jsonb))');
    params.push(JSON.stringify(groups.flatMap((group) => statusesOfGroup(group as RunStatusGroup))));
  }
  const workspaces = listParameter(query, 'filter[workspace_names]');
  if (workspaces) {
    sql.push(
      'workspace_id in (select w.id from workspaces w where w.organization_id = runs.organization_id and w.name in (select jsonb_array_elements_text(?::jsonb)))',
    );
    params.push(JSON.stringify(workspaces));
  }
  if (listParameter(query, 'filter[agent_pool_names]')) sql.push('false');
  const timeframe = listParameter(query, 'filter[timeframe]');
  if (timeframe && timeframe.length > 1)
    throw invalidParameter('filter[timeframe]', 'filter[timeframe] takes one value: a year, or `year`.');
  const [frame = 'year'] = timeframe ?? [];
  if (frame === 'year') sql.push(`created_at > now() - interval '1 year'`);
  else if (/^\d{4}$/.test(frame)) {
    sql.push(`extract(year from created_at at time zone 'UTC') = ?`);
    params.push(Number(frame));
  } else
    throw invalidParameter('filter[timeframe]', `'${frame}' is not a timeframe; use a year (2026) or \`year\` for the last twelve months.`);
  return { sql, params };
}

/** One page of a workspace's runs matching the filters, newest first, with the total count: two statements. */
export async function findRunPage(
  em: EntityManager,
  workspaceId: string,
  query: Query,
  page: { size: number; offset: number },
): Promise<[Run[], number]> {
  const conditions = runListConditions(query);
  const where = ['workspace_id = ?', ...conditions.sql].join(' and ');
  const params = [workspaceId, ...conditions.params];
  const [counted] = await em.execute<{ total: string }[]>(`select count(*) as total from runs where ${where}`, params);
  const rows = await em.execute<{ id: string }[]>(`select id from runs where ${where} order by created_at desc, id desc limit ? offset ?`, [
    ...params,
    page.size,
    page.offset,
  ]);
  const ids = rows.map((row) => row.id);
  const runs = ids.length === 0 ? [] : await em.find(Run, { id: { $in: ids } }, { populate: ['workspace'] });
  runs.sort((a, b) => ids.indexOf(a.id) - ids.indexOf(b.id));
  return [runs, Number(counted?.total ?? 0)];
}
