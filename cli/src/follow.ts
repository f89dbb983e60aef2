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
  return { id: run.data.id, status: String(run.data.attributes['status']), stages: stageViews };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export interface FollowOptions {
  pollIntervalMs: number;
  timeoutMs: number;
  waitForOverride: boolean;
}

/**
 * Polls the run at the interval until the command's verdict is in, or the timeout passes (then the
 * verdict is `stopped`). One look per interval: the service does the waiting.
 */
export async function follow(
  client: Client,
  command: Command,
  runId: string,
  options: FollowOptions,
  reporter: Reporter,
): Promise<{ state: RunState; verdict: Verdict }> {
  const deadline = Date.now() + options.timeoutMs;
  const stage = STAGE_OF[command];
  const shown = stage ? [stage] : ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];
  let announced = false;
  for (;;) {
    const state = await readRun(client, runId);
    reporter.update(state, shown);
    const verdict = verdictOf(command, state, options.waitForOverride);
    if (verdict.kind !== 'wait') return { state, verdict };
    if (verdict.awaitingOverride && !announced) {
      announced = true;
      reporter.line(
        `run ${runId}: a mandatory task failed and the run waits for an override (someone with manage-policy-overrides: ` +
          `POST /api/v2/task-stages/<id>/actions/override) or a discard; waiting`,
      );
    }
    if (Date.now() >= deadline) {
      return { state, verdict: { kind: 'stopped', reason: `still ${state.status} after --timeout ${options.timeoutMs / 1000} s` } };
    }
    await sleep(Math.min(options.pollIntervalMs, Math.max(0, deadline - Date.now())));
  }
}
