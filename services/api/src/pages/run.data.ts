import { outcomeSeveritySql, RUN_STAGES, TAG_LEVELS, type RunEventAction, type TagLevel } from '@runtasks/shared/domain';
import { DeliveryAttempt, TaskResult, TaskStage, type Run } from '@runtasks/shared/db';
import { notFound } from '@runtasks/shared/errors';
import { createHash } from 'node:crypto';
import { poolOf, type ApiContext } from '../context.ts';
import { actorNames } from '../services/actor-names.service.ts';
import { canOverrideTasks, findRun } from '../services/run-lookup.service.ts';
import { mayOnWorkspace, pagePath } from './access.ts';
import { MARKDOWN_MAX_CHARS } from './markdown.ts';

/** Outcomes shown per run page at most; the rest stay readable through the API. */
export const MAX_OUTCOMES = 1000;
const MAX_ATTEMPTS = 1000;
/** Markdown rendered per page at most: past it, bodies are left to their own page, so no server can make a page costly. */
export const MARKDOWN_BUDGET = 1024 * 1024;

/** What the page shows of an outcome: its body cut to what is rendered, or left out once the page's budget is spent. */
export interface OutcomeView {
  id: string;
  taskResultId: string;
  outcomeId: string;
  description: string | null;
  url: string | null;
  tags: unknown;
  body: string | null;
  /** Left out of this page, its budget spent: the outcome's own page shows it. */
  bodyOmitted: boolean;
}

/** Who did what to the run, for people: the run event with its actor's name and comment. */
export interface RunEventView {
  action: RunEventAction;
  actor: string;
  at: Date;
  comment: string | null;
  taskStageId: string | null;
  description: string | null;
}

/** A result's outcomes counted by severity (the most severe level among each outcome's tags). */
export type SeverityCounts = Record<TagLevel, number>;

/** Bodies are cut in the query: a result's outcomes may carry megabytes, of which a page renders a little. */
const OUTCOMES_SQL = `select id, task_result_id, outcome_id, description, url, tags, left(body, $2) as body
   from task_result_outcomes where task_result_id = any($1::text[]) order by created_at, id limit $3`;

/** An outcome's row as the queries here read it. */
interface OutcomeRow {
  id: string;
  task_result_id: string;
  outcome_id: string;
  description: string | null;
  url: string | null;
  tags: unknown;
  body: string | null;
}

const outcomeView = (row: OutcomeRow, body: string | null, bodyOmitted: boolean): OutcomeView => ({
  id: row.id,
  taskResultId: row.task_result_id,
  outcomeId: row.outcome_id,
  description: row.description,
  url: row.url,
  tags: row.tags,
  body,
  bodyOmitted,
});

async function outcomesOf(ctx: ApiContext, resultIds: readonly string[]): Promise<OutcomeView[]> {
  const { rows } = await (await poolOf(ctx)).query<OutcomeRow>(OUTCOMES_SQL, [resultIds, MARKDOWN_MAX_CHARS + 1, MAX_OUTCOMES]);
  let budget = MARKDOWN_BUDGET;
  return rows.map((row) => {
    const fits = row.body !== null && row.body.length <= budget;
    if (fits) budget -= row.body?.length ?? 0;
    return outcomeView(row, fits ? row.body : null, row.body !== null && !fits);
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
  severityByResult: Map<string, SeverityCounts>;
  /** Oldest first. */
  events: RunEventView[];
  /** What the signed-in principal may do here, by the API's rules. */
  may: { runActions: boolean; override: boolean };
  /** The live part's fingerprint as this data has it (the ETag its first refresh sends). */
  fingerprint: string;
  /** When the page was made, for "how long ago". */
  now: Date;
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

const SEVERITY_SQL = `select task_result_id, severity, count(*)::int as outcomes
   from (select task_result_id, ${outcomeSeveritySql('tags')} as severity from task_result_outcomes where task_result_id = any($1::text[])) o
  group by task_result_id, severity`;

/** Every outcome of the results counted by severity (not only those the page lists): one aggregate. */
async function severitiesOf(ctx: ApiContext, resultIds: readonly string[]): Promise<Map<string, SeverityCounts>> {
  const counts = new Map<string, SeverityCounts>();
  if (resultIds.length === 0) return counts;
  const { rows } = await (
    await poolOf(ctx)
  ).query<{ task_result_id: string; severity: number; outcomes: number }>(SEVERITY_SQL, [resultIds]);
  for (const row of rows) {
    const level = TAG_LEVELS[row.severity] ?? 'none';
    const entry = counts.get(row.task_result_id) ?? { none: 0, info: 0, warning: 0, error: 0 };
    entry[level] += row.outcomes;
    counts.set(row.task_result_id, entry);
  }
  return counts;
}

const EVENTS_SQL = `select e.action, e.actor_id, e.created_at, e.task_stage_id, e.description, c.body as comment
   from run_events e left join run_comments c on c.id = e.comment_id where e.run_id = $1 order by e.created_at, e.id limit 500`;

/** The run's events with their actors' names (a run has a few: one per action taken on it). */
async function eventsOf(ctx: ApiContext, runId: string): Promise<RunEventView[]> {
  const { rows } = await (
    await poolOf(ctx)
  ).query<{
    action: RunEventAction;
    actor_id: string | null;
    created_at: Date;
    task_stage_id: string | null;
    description: string | null;
    comment: string | null;
  }>(EVENTS_SQL, [runId]);
  const names = await actorNames(
    ctx.state.em,
    rows.map((row) => row.actor_id),
  );
  return rows.map((row) => ({
    action: row.action,
    actor: row.actor_id === null ? 'the service' : (names.get(row.actor_id) ?? row.actor_id),
    at: new Date(row.created_at),
    comment: row.comment,
    taskStageId: row.task_stage_id,
    description: row.description,
  }));
}

/** Everything the run page shows, in a handful of queries whatever the number of stages and results. */
export async function loadRunPage(ctx: ApiContext, run: Run): Promise<RunPageData> {
  // Taken first: anything that changes while the rest is read makes the page's first refresh a 200, never a stale 304.
  const { etag: fingerprint, runVersion } = await fingerprintOf(ctx, run);
  const em = ctx.state.em;
  // The run itself was read before it (findPageRun): where it moved since, it is read again, or the page
  // would show its old status under the new fingerprint and every refresh would be a 304.
  if (runVersion !== run.version) await em.refresh(run);
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
  const [severityByResult, events] = await Promise.all([severitiesOf(ctx, resultIds), eventsOf(ctx, run.id)]);
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
    severityByResult,
    events,
    may: {
      runActions: await mayOnWorkspace(ctx, 'runs:apply', run.workspace.id),
      override: canOverrideTasks(ctx.state.principal, run.organization.id),
    },
    fingerprint,
    now: new Date(),
  };
}

/** One outcome of the page's run, body and all (the run page leaves long bodies to this): 404 where it is not this run's. */
export async function loadOutcome(ctx: ApiContext, run: Run, outcomeId: string): Promise<OutcomeView & { taskName: string }> {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(outcomeId)) throw notFound();
  const { rows } = await (
    await poolOf(ctx)
  ).query<OutcomeRow & { task_name: string }>(
    `select o.id, o.task_result_id, o.outcome_id, o.description, o.url, o.tags, o.body, tr.task_name
       from task_result_outcomes o join task_results tr on tr.id = o.task_result_id join task_stages ts on ts.id = tr.task_stage_id
      where o.id = $1 and ts.run_id = $2`,
    [outcomeId, run.id],
  );
  const [row] = rows;
  if (!row) throw notFound();
  return { ...outcomeView(row, row.body, false), taskName: row.task_name };
}

/**
 * What changes whenever the run page would: the versions of the run, its stages and results, their
 * delivery attempts, its events (an action, a comment), and who is looking. An open page asks with it and gets 304 while it holds, so
 * polling costs one small statement, not a page.
 */
export async function runFingerprint(ctx: ApiContext, run: Run): Promise<string> {
  return (await fingerprintOf(ctx, run)).etag;
}

/** The fingerprint, and the run's version it was taken at. */
async function fingerprintOf(ctx: ApiContext, run: Run): Promise<{ etag: string; runVersion: number | undefined }> {
  const [row] = await ctx.state.em.execute<Record<string, unknown>[]>(
    `select r.version,
            (select string_agg(ts.id || ':' || ts.version, ',' order by ts.id) from task_stages ts where ts.run_id = r.id) as stages,
            (select string_agg(tr.id || ':' || tr.version || ':' || tr.attempts || ':' || coalesce(tr.acknowledged_at::text, ''), ',' order by tr.id)
               from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = r.id) as results,
            (select count(*) from delivery_attempts da join task_results tr on tr.id = da.task_result_id
               join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = r.id) as deliveries,
            (select count(*) from run_events e where e.run_id = r.id) as events
       from runs r where r.id = ?`,
    [run.id],
  );
  const seen = JSON.stringify([row, ctx.state.principal]);
  const runVersion = row?.['version'] === undefined ? undefined : Number(row['version']);
  return { etag: `"${createHash('sha256').update(seen).digest('base64url').slice(0, 27)}"`, runVersion };
}
