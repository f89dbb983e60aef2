import { runActionSubject, runActionTarget, type RunStatus, type TaskResultStatus, type TaskStageStatus } from '@runtasks/shared/domain';

/** How a status reads at a glance: the badge's colour. The class names are fixed here, never taken from the data. */
export type Tone = 'ok' | 'bad' | 'warn' | 'info' | 'muted';

export interface StatusWords {
  label: string;
  tone: Tone;
}

/**
 * A run's status as people say it. `planned` and `post_plan_completed` mean "needs confirmation" where
 * a person must confirm (apply) the run, and "planned" where nothing is left to confirm.
 */
const RUN_WORDS: Record<RunStatus, StatusWords> = {
  pending: { label: 'Pending', tone: 'muted' },
  pre_plan_running: { label: 'Pre-plan tasks running', tone: 'info' },
  pre_plan_completed: { label: 'Pre-plan tasks passed', tone: 'info' },
  pre_plan_awaiting_decision: { label: 'Awaiting override (pre-plan)', tone: 'warn' },
  planning: { label: 'Planning', tone: 'info' },
  planned: { label: 'Planned', tone: 'ok' },
  post_plan_running: { label: 'Post-plan tasks running', tone: 'info' },
  post_plan_completed: { label: 'Post-plan tasks passed', tone: 'info' },
  post_plan_awaiting_decision: { label: 'Awaiting override (post-plan)', tone: 'warn' },
  confirmed: { label: 'Confirmed', tone: 'info' },
  pre_apply_running: { label: 'Pre-apply tasks running', tone: 'info' },
  pre_apply_completed: { label: 'Pre-apply tasks passed', tone: 'info' },
  pre_apply_awaiting_decision: { label: 'Awaiting override (pre-apply)', tone: 'warn' },
  applying: { label: 'Applying', tone: 'info' },
  applied: { label: 'Applied', tone: 'ok' },
  post_apply_running: { label: 'Post-apply tasks running', tone: 'info' },
  post_apply_completed: { label: 'Applied', tone: 'ok' },
  planned_and_finished: { label: 'Planned and finished', tone: 'ok' },
  discarded: { label: 'Discarded', tone: 'muted' },
  errored: { label: 'Errored', tone: 'bad' },
  canceled: { label: 'Canceled', tone: 'muted' },
};

export interface RunForWords {
  status: RunStatus;
  planOnly: boolean;
  autoApply: boolean;
  executionMode: 'remote' | 'local';
  hasChanges: boolean;
}

/** A run's status now, with what it waits for: a run a person may apply, and that will not apply itself, needs confirmation. */
export function runWords(run: RunForWords): StatusWords {
  if (!run.autoApply && runActionTarget('apply', runActionSubject(run)) !== null) return { label: 'Needs confirmation', tone: 'warn' };
  return RUN_WORDS[run.status];
}

/** A run status alone (a timeline entry): its words, without what the run needs now. */
export const runStatusWords = (status: string): StatusWords => RUN_WORDS[status as RunStatus] ?? { label: status, tone: 'info' };

const STAGE_WORDS: Record<TaskStageStatus, StatusWords> = {
  pending: { label: 'Pending', tone: 'muted' },
  running: { label: 'Running', tone: 'info' },
  passed: { label: 'Passed', tone: 'ok' },
  failed: { label: 'Failed', tone: 'bad' },
  awaiting_override: { label: 'Awaiting override', tone: 'warn' },
  errored: { label: 'Errored', tone: 'bad' },
  canceled: { label: 'Canceled', tone: 'muted' },
  unreachable: { label: 'Unreachable', tone: 'bad' },
};

/** A stage's status; one a person overrode reads "Overridden" once it ran on. */
export const stageWords = (status: TaskStageStatus, overridden: boolean): StatusWords =>
  overridden && (status === 'running' || status === 'passed') ? { label: 'Overridden', tone: 'warn' } : STAGE_WORDS[status];

// A result reads as a stage in the same status (a result never awaits an override itself).
const RESULT_WORDS: Record<TaskResultStatus, StatusWords> = STAGE_WORDS;

/** A task result's status; an advisory failure only warns. */
export const resultWords = (status: TaskResultStatus, enforcement: string): StatusWords =>
  status === 'failed' && enforcement === 'advisory' ? { label: 'Failed (advisory)', tone: 'warn' } : RESULT_WORDS[status];
