import { DeliveryAttempt, RUN_STAGES, TaskResult, TaskResultOutcome, TaskStage, type Run } from '@runtasks/shared';
import { createHash } from 'node:crypto';
import type { ApiContext } from '../context.ts';
import { canOverrideTasks, findRun } from '../routes/runs.routes.ts';
import { mayOnWorkspace, pagePath } from './access.ts';

/** Outcomes shown per run page at most; the rest stay readable through the API. */
const MAX_OUTCOMES = 1000;
const MAX_ATTEMPTS = 1000;

export interface RunPageData {
  run: Run;
  organizationName: string;
  workspaceName: string;
  /** The run page's own path. */
  path: string;
  stages: TaskStage[];
  resultsByStage: Map<string, TaskResult[]>;
  outcomesByResult: Map<string, TaskResultOutcome[]>;
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
          em.find(TaskResultOutcome, { taskResult: { $in: resultIds } }, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: MAX_OUTCOMES }),
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
    outcomesByResult: groupBy(outcomes, (outcome) => outcome.taskResult.id),
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
