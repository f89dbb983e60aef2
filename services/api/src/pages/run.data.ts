import { RUN_STAGES } from '@runtasks/shared/domain';
import { DeliveryAttempt, TaskResult, TaskStage, type Run } from '@runtasks/shared/db';
import { createHash } from 'node:crypto';
import { poolOf, type ApiContext } from '../context.ts';
import { canOverrideTasks, findRun } from '../services/run-lookup.service.ts';
import { mayOnWorkspace, pagePath } from './access.ts';
import { MARKDOWN_MAX_CHARS } from './markdown.ts';

/** Outcomes shown per run page at most; the rest stay readable through the API. */
const MAX_OUTCOMES = 1000;
const MAX_ATTEMPTS = 1000;
/** Markdown rendered per page at most: past it, bodies are left for the API, so no server can make a page costly. */
const MARKDOWN_BUDGET = 1024 * 1024;

/** What the page shows of an outcome: its body cut to what is rendered, or left out once the page's budget is spent. */
export interface OutcomeView {
  id: string;
  taskResultId: string;
  outcomeId: string;
  description: string | null;
  url: string | null;
  tags: unknown;
  body: string | null;
  bodyOmitted: boolean;
}

/** Bodies are cut in the query: a result's outcomes may carry megabytes, of which a page renders a little. */
const OUTCOMES_SQL = `select id, task_result_id, outcome_id, description, url, tags, left(body, $2) as body
   from task_result_outcomes where task_result_id = any($1::text[]) order by created_at, id limit $3`;

async function outcomesOf(ctx: ApiContext, resultIds: readonly string[]): Promise<OutcomeView[]> {
  const { rows } = await (
    await poolOf(ctx)
  ).query<{
    id: string;
    task_result_id: string;
    outcome_id: string;
    description: string | null;
    url: string | null;
    tags: unknown;
    body: string | null;
  }>(OUTCOMES_SQL, [resultIds, MARKDOWN_MAX_CHARS + 1, MAX_OUTCOMES]);
  let budget = MARKDOWN_BUDGET;
  return rows.map((row) => {
    const fits = row.body !== null && row.body.length <= budget;
    if (fits) budget -= row.body?.length ?? 0;
    return {
      id: row.id,
      taskResultId: row.task_result_id,
      outcomeId: row.outcome_id,
      description: row.description,
      url: row.url,
      tags: row.tags,
      body: fits ? row.body : null,
      bodyOmitted: row.body !== null && !fits,
    };
  });
}

export interface RunPageData {
  run: Run;
  organizationName: string;
  workspaceName: string;
  /** The run page's own path. */
  path: string;
  stages: TaskStage[];
  resultsByStage: Map<string, TaskResult[]>;
  outcomesByResult: Map<string, OutcomeView[]>;
  attemptsByResult: Map<string, DeliveryAttempt[]>;
  /** What the signed-in principal may do here, by the API's rules. */
  may: { runActions: boolean; override: boolean };
}

/**
 * The run of the page's URL, found as the API finds a run (the workspace scope in the same query) and
 * only in the organization and workspace the URL names: anything else is the API's 404.
 */
export async function findPageRun(ctx: ApiContext): Promise<Run> {
  return findRun(ctx, 'runs:read', {
    id: ctx.params['run_id'] ?? '',
    workspace: { name: ctx.params['workspace_name'] ?? '', organization: { name: ctx.params['organization_name'] ?? '' } },
  });
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
}

/** Everything the run page shows, in a handful of queries whatever the number of stages and results. */
export async function loadRunPage(ctx: ApiContext, run: Run): Promise<RunPageData> {
  const em = ctx.state.em;
  const stages = (await em.find(TaskStage, { run: run.id })).sort((a, b) => RUN_STAGES.indexOf(a.stage) - RUN_STAGES.indexOf(b.stage));
  const stageIds = stages.map((stage) => stage.id);
  const results =
    stageIds.length === 0 ? [] : await em.find(TaskResult, { taskStage: { $in: stageIds } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  const resultIds = results.map((result) => result.id);
  const [outcomes, attempts] =
    resultIds.length === 0
      ? [[], []]
      : await Promise.all([
          outcomesOf(ctx, resultIds),
          em.find(DeliveryAttempt, { taskResult: { $in: resultIds } }, { orderBy: { attempt: 'asc' }, limit: MAX_ATTEMPTS }),
        ]);
  const organizationName = ctx.params['organization_name'] ?? '';
  return {
    run,
    organizationName,
    workspaceName: run.workspace.name,
    path: pagePath(organizationName, 'workspaces', run.workspace.name, 'runs', run.id),
    stages,
    resultsByStage: groupBy(results, (result) => result.taskStage.id),
    outcomesByResult: groupBy(outcomes, (outcome) => outcome.taskResultId),
    attemptsByResult: groupBy(attempts, (attempt) => attempt.taskResult.id),
    may: {
      runActions: await mayOnWorkspace(ctx, 'runs:apply', run.workspace.id),
      override: canOverrideTasks(ctx.state.principal, run.organization.id),
    },
  };
}

/**
 * What changes whenever the run page would: the versions of the run, its stages and results, their
 * delivery attempts, and who is looking. An open page asks with it and gets 304 while it holds, so
 * polling costs one small statement, not a page.
 */
export async function runFingerprint(ctx: ApiContext, run: Run): Promise<string> {
  const [row] = await ctx.state.em.execute<Record<string, unknown>[]>(
    `select r.version,
            (select string_agg(ts.id || ':' || ts.version, ',' order by ts.id) from task_stages ts where ts.run_id = r.id) as stages,
            (select string_agg(tr.id || ':' || tr.version || ':' || tr.attempts || ':' || coalesce(tr.acknowledged_at::text, ''), ',' order by tr.id)
               from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = r.id) as results,
            (select count(*) from delivery_attempts da join task_results tr on tr.id = da.task_result_id
               join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = r.id) as deliveries
       from runs r where r.id = ?`,
    [run.id],
  );
  const seen = JSON.stringify([row, ctx.state.principal]);
  return `"${createHash('sha256').update(seen).digest('base64url').slice(0, 27)}"`;
}
