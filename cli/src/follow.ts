import type { Command } from './args.ts';
import type { Client, Document, Resource } from './client.ts';
import type { Reporter } from './output.ts';
import { STAGE_OF, verdictOf, type ResultView, type RunState, type Stage, type StageView, type Verdict } from './verdict.ts';

/** Reads the run and its task stages with their results: two requests per look. */
export async function readRun(client: Client, runId: string): Promise<RunState> {
  const notFound = `unknown run ${runId} (or the token cannot see its workspace)`;
  const run = await client.request<Document>('GET', `/runs/${runId}`, { notFound });
  const stages = await client.request<Document<Resource[]>>('GET', `/runs/${runId}/task-stages?include=task_results`, { notFound });
  const results = new Map<string, ResultView>();
  for (const doc of stages.included ?? []) {
    if (doc.type !== 'task-results') continue;
    const a = doc.attributes;
    results.set(doc.id, {
      id: doc.id,
      task: String(a['task-name'] ?? ''),
      stage: String(a['stage'] ?? '') as Stage,
      enforcement: String(a['workspace-task-enforcement-level'] ?? ''),
      status: String(a['status'] ?? ''),
      message: typeof a['message'] === 'string' ? a['message'] : null,
      url: typeof a['url'] === 'string' ? a['url'] : null,
      outcomes: Number(a['task-result-outcomes-count'] ?? 0),
    });
  }
  const stageViews: StageView[] = stages.data.map((doc) => {
    const ids = (doc.relationships?.['task-results']?.data ?? []) as { id: string }[];
    return {
      id: doc.id,
      stage: String(doc.attributes['stage']) as Stage,
      status: String(doc.attributes['status']),
      // Mandatory tasks first, then by name: the same order in every look, every output and every summary.
      results: ids
        .map((ref) => results.get(ref.id))
        .filter((result): result is ResultView => result !== undefined)
        .sort((a, b) => Number(b.enforcement === 'mandatory') - Number(a.enforcement === 'mandatory') || a.task.localeCompare(b.task)),
    };
  });
  const workspace = run.data.relationships?.['workspace']?.data as { id?: string } | null | undefined;
  return { id: run.data.id, status: String(run.data.attributes['status']), stages: stageViews, workspaceId: workspace?.id };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** In CI a silent log looks like a hung job: a line at least this often while waiting. */
export const STILL_WAITING_MS = 30_000;

export interface FollowOptions {
  pollIntervalMs: number;
  /** When the command gives up (epoch ms): its --timeout from its start. */
  deadline: number;
  timeoutMs: number;
  waitForOverride: boolean;
  /** The run's page, for the override hint. */
  page: string;
}

/** "12 min", "40 s", "2 h 5 min": how long ago, for people. */
export function ago(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/**
 * A pending run waits for the run that holds its workspace: which one, since when, and what it was
 * started for, so that an abandoned run can be told from a busy one. Undefined where nothing holds it.
 */
export async function queuedBehind(client: Client, state: RunState, now = Date.now()): Promise<string | undefined> {
  if (!state.workspaceId) return undefined;
  const workspace = await client.request<Document>('GET', `/workspaces/${state.workspaceId}`).catch(() => undefined);
  const relationships = workspace?.data.relationships ?? {};
  const holder = [relationships['locked-by'], relationships['current-run']]
    .map((relation) => relation?.data as { id?: string; type?: string } | null | undefined)
    .find((data) => data?.type === 'runs' && data.id !== undefined && data.id !== state.id);
  if (!holder?.id) return undefined;
  const other = await client.request<Document>('GET', `/runs/${holder.id}`).catch(() => undefined);
  if (!other) return `queued behind ${holder.id}`;
  const a = other.data.attributes;
  const created = Date.parse(String(a['created-at'] ?? ''));
  const since = Number.isNaN(created) ? '' : `, started ${ago(now - created)} ago`;
  const message = typeof a['message'] === 'string' && a['message'] ? ` for "${a['message'].replace(/\s+/g, ' ').slice(0, 120)}"` : '';
  return `queued behind ${holder.id} (${String(a['status'])}${since}${message}); if its pipeline is gone, end it with \`runtasks run cancel ${holder.id}\``;
}

/** The line a run waiting for an override gets: which stage, which tasks, where to decide. */
function overrideHint(runId: string, verdict: Verdict, page: string): string {
  const blocker = 'blocker' in verdict ? verdict.blocker : undefined;
  const tasks =
    blocker?.results.map((result) => `${result.task}${result.message ? `: ${result.message.replace(/\s+/g, ' ').trim()}` : ''}`) ?? [];
  const stage = blocker ? `task stage ${blocker.stageId} (${blocker.stage})` : 'its task stage';
  return (
    `run ${runId}: mandatory task${tasks.length === 1 ? '' : 's'} failed${tasks.length ? ` (${tasks.join('; ')})` : ''}; the run waits for an override of ${stage} ` +
    `by someone with manage-policy-overrides (on the run page ${page}, or POST /api/v2/task-stages/${blocker?.stageId ?? 'STAGE'}/actions/override) or a discard; waiting`
  );
}

/**
 * Polls the run at the interval until the command's verdict is in, or the deadline passes (then the
 * verdict is `stopped`). One look per interval: the service does the waiting. In CI, a line at least
 * every STILL_WAITING_MS.
 */
export async function follow(
  client: Client,
  command: Command,
  runId: string,
  options: FollowOptions,
  reporter: Reporter,
): Promise<{ state: RunState; verdict: Verdict }> {
  const started = Date.now();
  const stage = STAGE_OF[command];
  const shown = stage ? [stage] : ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];
  let announced = false;
  let queueNote: string | undefined;
  for (;;) {
    const state = await readRun(client, runId);
    reporter.update(state, shown);
    const verdict = verdictOf(command, state, options.waitForOverride);
    if (verdict.kind !== 'wait') return { state, verdict };
    if (verdict.awaitingOverride && !announced) {
      announced = true;
      reporter.line(overrideHint(runId, verdict, options.page));
    }
    if (state.status === 'pending') {
      const note = await queuedBehind(client, state);
      if (note && note.split(' (')[0] !== queueNote?.split(' (')[0]) reporter.line(`run ${runId}: ${note}`);
      queueNote = note;
    }
    if (Date.now() >= options.deadline) {
      const where = queueNote && state.status === 'pending' ? ` (${queueNote.split(';')[0]})` : '';
      return { state, verdict: { kind: 'stopped', reason: `still ${state.status}${where} after --timeout ${options.timeoutMs / 1000} s` } };
    }
    if (reporter.quietMs() >= STILL_WAITING_MS) {
      reporter.line(
        `run ${runId}: still waiting (${stage ?? 'the end of the run'}; run ${state.status}; ${ago(Date.now() - started)} elapsed)`,
      );
    }
    const untilHeartbeat = Math.max(100, STILL_WAITING_MS - reporter.quietMs());
    await sleep(Math.min(options.pollIntervalMs, untilHeartbeat, Math.max(0, options.deadline - Date.now())));
  }
}
