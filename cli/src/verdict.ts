import type { Command } from './args.ts';

/**
 * When a command has waited long enough, and what the run's state means for the pipeline. Pure: the
 * watcher feeds it each snapshot of the run and its stages.
 */
export type Stage = 'pre_plan' | 'post_plan' | 'pre_apply' | 'post_apply';

export interface ResultView {
  id: string;
  task: string;
  stage: Stage;
  enforcement: string;
  status: string;
  message: string | null;
  url: string | null;
  outcomes: number;
}

export interface StageView {
  id: string;
  stage: Stage;
  status: string;
  results: ResultView[];
}

export interface RunState {
  id: string;
  status: string;
  stages: StageView[];
  /** Where it is known: for what holds a pending run back. */
  workspaceId?: string | undefined;
}

/** The stage a verdict is about, with the mandatory results that blocked it (for the hint and the annotations). */
export interface Blocker {
  stage: Stage;
  stageId: string;
  results: ResultView[];
}

export type Verdict =
  | { kind: 'wait'; awaitingOverride: boolean; blocker?: Blocker }
  | { kind: 'go' }
  | { kind: 'blocked'; reason: string; blocker?: Blocker }
  | { kind: 'stopped'; reason: string };

/** The lifecycle in order, each stage's waiting for a decision before its completion. */
const ORDER = [
  'pending',
  'pre_plan_running',
  'pre_plan_awaiting_decision',
  'pre_plan_completed',
  'planning',
  'planned',
  'post_plan_running',
  'post_plan_awaiting_decision',
  'post_plan_completed',
  'planned_and_finished',
  'confirmed',
  'pre_apply_running',
  'pre_apply_awaiting_decision',
  'pre_apply_completed',
  'applying',
  'applied',
  'post_apply_running',
  'post_apply_completed',
];

/** The stage each command waits for. `watch` follows them all; `cancel` and `discard` wait for the run's end. */
export const STAGE_OF: Record<Command, Stage | undefined> = {
  start: 'pre_plan',
  plan: 'post_plan',
  apply: 'pre_apply',
  applied: 'post_apply',
  watch: undefined,
  cancel: undefined,
  discard: undefined,
};

/** The first status at which the command's stage is behind the run (it goes on from there without the CLI). */
const GATE: Record<Exclude<Command, 'watch' | 'cancel' | 'discard'>, string> = {
  start: 'planning',
  plan: 'post_plan_completed',
  apply: 'applying',
  applied: 'post_apply_completed',
};

const FINAL_OK = new Set(['applied', 'post_apply_completed', 'planned_and_finished']);
const FINAL_NOT_OK = new Set(['errored', 'canceled', 'discarded']);
const BLOCKING_STAGE = new Set(['failed', 'errored', 'unreachable', 'awaiting_override']);
const FINAL_STAGE = new Set(['passed', 'failed', 'errored', 'canceled', 'unreachable']);
export const FAILED_RESULT = new Set(['failed', 'errored', 'unreachable']);

const rank = (status: string): number => ORDER.indexOf(status);

const failedMandatory = (stage: StageView): ResultView[] =>
  stage.results.filter((result) => result.enforcement === 'mandatory' && FAILED_RESULT.has(result.status));

/** Every status at which a run will not move again. */
export const RUN_ENDED: ReadonlySet<string> = new Set([...FINAL_OK, ...FINAL_NOT_OK, 'force_canceled']);

export function verdictOf(command: Command, run: RunState, waitForOverride: boolean): Verdict {
  // Ending the run is what `cancel` and `discard` wait for, whatever the end.
  if (command === 'cancel' || command === 'discard') {
    const postApply = run.stages.find((item) => item.stage === 'post_apply');
    const ended = RUN_ENDED.has(run.status) && !(run.status === 'applied' && postApply && !FINAL_STAGE.has(postApply.status));
    return ended ? { kind: 'go' } : { kind: 'wait', awaitingOverride: false };
  }
  if (FINAL_NOT_OK.has(run.status) || run.status === 'force_canceled') {
    // A discard while the stage waited for an override cancels the stage: its failed mandatory tasks still blocked it.
    const stage = run.stages.find(
      (item) =>
        BLOCKING_STAGE.has(item.status) ||
        (item.status === 'canceled' &&
          item.results.some((result) => result.enforcement === 'mandatory' && FAILED_RESULT.has(result.status))),
    );
    if (stage) {
      const tasks = failedMandatory(stage);
      const names = tasks.map((result) => result.task).join(', ');
      return {
        kind: 'blocked',
        reason: `run ${run.status}: ${stage.stage} blocked by mandatory task${tasks.length === 1 ? '' : 's'} ${names || '(none named)'}`,
        blocker: { stage: stage.stage, stageId: stage.id, results: tasks },
      };
    }
    return { kind: 'stopped', reason: `run ${run.status}` };
  }
  if (run.status.endsWith('_awaiting_decision')) {
    const name = run.status.replace('_awaiting_decision', '');
    const stage = run.stages.find((item) => item.stage === name);
    const blocker = stage ? { stage: stage.stage, stageId: stage.id, results: failedMandatory(stage) } : undefined;
    if (waitForOverride) return { kind: 'wait', awaitingOverride: true, ...(blocker && { blocker }) };
    return { kind: 'blocked', reason: `${name} blocked by a mandatory task: the run waits for an override`, ...(blocker && { blocker }) };
  }
  // `applied` is final only when the run has no post_apply tasks; with them, wait for their verdict.
  const postApply = run.stages.find((item) => item.stage === 'post_apply');
  if (run.status === 'applied' && postApply && !FINAL_STAGE.has(postApply.status)) return { kind: 'wait', awaitingOverride: false };
  if (FINAL_OK.has(run.status)) return { kind: 'go' };
  // Without post_plan tasks a run that is not auto-applied rests at `planned`, waiting for its confirmation.
  if (command === 'plan' && run.status === 'planned' && !run.stages.some((item) => item.stage === 'post_plan')) return { kind: 'go' };
  if (command === 'watch') return { kind: 'wait', awaitingOverride: false };
  const current = rank(run.status);
  if (current === -1) return { kind: 'wait', awaitingOverride: false };
  return current >= rank(GATE[command]) ? { kind: 'go' } : { kind: 'wait', awaitingOverride: false };
}

/** The results a command reports: its stage's, or every stage's for `watch`. */
export function resultsOf(command: Command, run: RunState): StageView[] {
  const stage = STAGE_OF[command];
  return stage ? run.stages.filter((item) => item.stage === stage) : run.stages;
}

/** Failed results that did not stop the run: advisory ones, overridden ones, and any at post_apply. */
export function warningsOf(stages: readonly StageView[]): ResultView[] {
  return stages.flatMap((stage) => stage.results.filter((result) => FAILED_RESULT.has(result.status)));
}

export function isFinalResult(status: string): boolean {
  return FINAL_STAGE.has(status);
}
