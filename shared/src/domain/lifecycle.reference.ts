// The lifecycle rules written again, independently, from docs/design.md: the tests compare lifecycle.ts with them.
import {
  type ResultSnapshot,
  type RunSnapshot,
  type RunStep,
  type StageEvaluation,
  type StageOutcome,
  type StageSnapshot,
} from './lifecycle.ts';
import { type RunStage, type RunStatus, type TaskResultStatus, type TaskStageStatus } from './statuses.ts';

// ---------------------------------------------------------------------------------------------
// Reference rules, written from docs/design.md ("How a run moves" and the rules under it)
// ---------------------------------------------------------------------------------------------

/** Results still waiting for their task. */
export const OPEN_RESULT_STATUSES: readonly TaskResultStatus[] = ['pending', 'running'];

/** Blocking outcomes of a stage, strongest first: a canceled run trumps everything, then failed, errored, unreachable. */
export const BLOCKING_PRECEDENCE: readonly StageOutcome[] = ['canceled', 'failed', 'errored', 'unreachable'];

/**
 * Stage status: nothing is decided while a result is open; then the mandatory results decide
 * (worst outcome by precedence, else passed) and every other result that did not pass leaves a warning.
 * In post_apply no result decides: its tasks act as advisory.
 */
export function referenceEvaluation(stage: RunStage, results: readonly ResultSnapshot[]): StageEvaluation | null {
  if (results.some((result) => OPEN_RESULT_STATUSES.includes(result.status))) return null;
  const decides = (result: ResultSnapshot): boolean => stage !== 'post_apply' && result.enforcementLevel === 'mandatory';
  const decisive = new Set<TaskResultStatus>(results.filter(decides).map((result) => result.status));
  const status = BLOCKING_PRECEDENCE.find((outcome) => decisive.has(outcome)) ?? 'passed';
  const warning = results.filter((result) => !decides(result)).some((result) => result.status !== 'passed');
  return { status, warning };
}

export const runningStatus = (stage: RunStage) => `${stage}_running` as const;
export const completedStatus = (stage: RunStage) => `${stage}_completed` as const;
export const STAGE_STATUSES_DONE: readonly TaskStageStatus[] = ['passed', 'failed', 'errored', 'unreachable', 'canceled'];
export const WAIT: RunStep = { kind: 'wait' };
export const setRun = (status: RunStatus): RunStep => ({ kind: 'set-run', status });
export const startStage = (stage: RunStage): RunStep => ({ kind: 'start-stage', stage, runStatus: runningStatus(stage) });
export const finishStage = (stage: RunStage, stageStatus: TaskStageStatus, runStatus: RunStatus, warning: boolean): RunStep => ({
  kind: 'finish-stage',
  stage,
  stageStatus,
  runStatus,
  warning,
});

/** The run status that holds a blocking stage for a person; post_apply has none (it never blocks). */
export function awaitingStatus(stage: RunStage): RunStatus | null {
  switch (stage) {
    case 'pre_plan':
      return 'pre_plan_awaiting_decision';
    case 'post_plan':
      return 'post_plan_awaiting_decision';
    case 'pre_apply':
      return 'pre_apply_awaiting_decision';
    case 'post_apply':
      return null;
  }
}

const findStage = (stages: readonly StageSnapshot[], stage: RunStage): StageSnapshot | undefined =>
  stages.find((candidate) => candidate.stage === stage);

/** Past a stage (it passed, or the run has no tasks there): the lifecycle's next status. */
function pastStage(run: RunSnapshot, stage: RunStage): RunStep {
  if (stage === 'pre_plan') return setRun('planning');
  if (stage === 'pre_apply') return setRun('applying');
  if (stage === 'post_apply') return WAIT; // applied (or post_apply_completed) is where a run ends
  // post_plan: speculative runs finish, auto-apply confirms, the others wait for `apply` or `discard`.
  if (run.planOnly) return setRun('planned_and_finished');
  return run.autoApply ? setRun('confirmed') : WAIT;
}

/** Arriving at a stage: start it when it has tasks still to run; stages without tasks are skipped. */
function arriveAt(run: RunSnapshot, stages: readonly StageSnapshot[], stage: RunStage): RunStep {
  const snapshot = findStage(stages, stage);
  return snapshot && !STAGE_STATUSES_DONE.includes(snapshot.status) ? startStage(stage) : pastStage(run, stage);
}

/** A running stage whose results may all have ended: finish it, hold it, or wait. */
function decideRunning(run: RunSnapshot, stage: RunStage, snapshot: StageSnapshot): RunStep {
  const evaluation = snapshot.evaluation;
  if (evaluation === null) return WAIT; // results still open
  if (snapshot.overridden) return finishStage(stage, 'passed', completedStatus(stage), true);
  if (evaluation.status === 'passed') return finishStage(stage, 'passed', completedStatus(stage), evaluation.warning);
  const awaiting = awaitingStatus(stage);
  const held = run.overridesEnabled && !run.planOnly && awaiting !== null && evaluation.status !== 'canceled';
  return held
    ? finishStage(stage, 'awaiting_override', awaiting, evaluation.warning)
    : finishStage(stage, evaluation.status, 'errored', evaluation.warning);
}

/** The run sits in a stage: decide it from its results. */
function decide(run: RunSnapshot, stages: readonly StageSnapshot[], stage: RunStage): RunStep {
  const snapshot = findStage(stages, stage);
  if (!snapshot) return setRun(completedStatus(stage));
  switch (snapshot.status) {
    case 'pending':
      return startStage(stage);
    case 'passed':
      return setRun(completedStatus(stage));
    case 'failed':
    case 'errored':
    case 'unreachable':
    case 'canceled':
      // A stage that did not pass stops the run, except post_apply, which never blocks.
      return setRun(stage === 'post_apply' ? completedStatus(stage) : 'errored');
    case 'awaiting_override':
      return setRun(awaitingStatus(stage) ?? 'errored');
    case 'running':
      return decideRunning(run, stage, snapshot);
  }
}

/** The run waits for a person while its stage is held; once the stage moved on (override), decide it again. */
const awaitDecision = (run: RunSnapshot, stages: readonly StageSnapshot[], stage: RunStage): RunStep =>
  findStage(stages, stage)?.status === 'awaiting_override' ? WAIT : decide(run, stages, stage);

/** Hand-written expectation of the next step, from the run lifecycle (docs/design.md, "How a run moves"). */
export function expectedStep(run: RunSnapshot, stages: readonly StageSnapshot[]): RunStep {
  switch (run.status) {
    case 'pending':
      return arriveAt(run, stages, 'pre_plan');
    case 'pre_plan_running':
      return decide(run, stages, 'pre_plan');
    case 'pre_plan_awaiting_decision':
      return awaitDecision(run, stages, 'pre_plan');
    case 'pre_plan_completed':
      return pastStage(run, 'pre_plan');
    case 'planning':
      return { kind: 'plan' };
    case 'planned':
      return arriveAt(run, stages, 'post_plan');
    case 'post_plan_running':
      return decide(run, stages, 'post_plan');
    case 'post_plan_awaiting_decision':
      return awaitDecision(run, stages, 'post_plan');
    case 'post_plan_completed':
      return pastStage(run, 'post_plan');
    case 'confirmed':
      // A plan-only run can never be confirmed; if it is, it errors instead of applying.
      return run.planOnly ? setRun('errored') : arriveAt(run, stages, 'pre_apply');
    case 'pre_apply_running':
      return decide(run, stages, 'pre_apply');
    case 'pre_apply_awaiting_decision':
      return awaitDecision(run, stages, 'pre_apply');
    case 'pre_apply_completed':
      return pastStage(run, 'pre_apply');
    case 'applying':
      return { kind: 'apply' };
    case 'applied':
      return arriveAt(run, stages, 'post_apply');
    case 'post_apply_running':
      return decide(run, stages, 'post_apply');
    case 'post_apply_completed':
    case 'planned_and_finished':
    case 'discarded':
    case 'errored':
    case 'canceled':
      return WAIT;
  }
}

export const m = (status: TaskResultStatus): ResultSnapshot => ({ status, enforcementLevel: 'mandatory' });
export const a = (status: TaskResultStatus): ResultSnapshot => ({ status, enforcementLevel: 'advisory' });
export const passed = (warning = false): StageEvaluation => ({ status: 'passed', warning });
export const blocked = (status: StageOutcome, warning = false): StageEvaluation => ({ status, warning });

export interface Flags {
  planOnly: boolean;
  autoApply: boolean;
  overridesEnabled: boolean;
}
