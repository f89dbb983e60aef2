import type { EnforcementLevel, ExecutionMode, RunStage, RunStatus, TaskResultStatus, TaskStageStatus } from './statuses.ts';

export const FINAL_RESULT_STATUSES: ReadonlySet<TaskResultStatus> = new Set(['passed', 'failed', 'errored', 'canceled', 'unreachable']);
export const FINAL_STAGE_STATUSES: ReadonlySet<TaskStageStatus> = new Set(['passed', 'failed', 'errored', 'canceled', 'unreachable']);

export const isFinalResult = (status: TaskResultStatus): boolean => FINAL_RESULT_STATUSES.has(status);

export interface ResultSnapshot {
  status: TaskResultStatus;
  enforcementLevel: EnforcementLevel;
}

export type StageOutcome = 'passed' | 'failed' | 'errored' | 'unreachable' | 'canceled';

export interface StageEvaluation {
  status: StageOutcome;
  /** An advisory (or post_apply) task did not pass: the run goes on with a warning. */
  warning: boolean;
}

/**
 * A stage's status from its results (DESIGN §3), or null while any result is still open.
 * Mandatory results decide; advisory ones only warn. post_apply never blocks: its tasks act as advisory.
 */
export function evaluateStage(stage: RunStage, results: readonly ResultSnapshot[]): StageEvaluation | null {
  if (results.some((result) => !isFinalResult(result.status))) return null;
  const blocking = results.filter((result) => result.enforcementLevel === 'mandatory' && stage !== 'post_apply');
  const warning = results.some((result) => !blocking.includes(result) && result.status !== 'passed');
  const has = (status: TaskResultStatus): boolean => blocking.some((result) => result.status === status);
  if (has('canceled')) return { status: 'canceled', warning };
  if (has('failed')) return { status: 'failed', warning };
  if (has('errored')) return { status: 'errored', warning };
  if (has('unreachable')) return { status: 'unreachable', warning };
  return { status: 'passed', warning };
}

export interface RunSnapshot {
  status: RunStatus;
  planOnly: boolean;
  autoApply: boolean;
  /** The organization holds blocking stages for an override instead of stopping the run. */
  overridesEnabled: boolean;
  /** `local`: the pipeline reports plan and apply, and the run waits for each (default `remote`: the built-in executor). */
  executionMode?: ExecutionMode;
  /** A reported plan changes something (read once the plan is reported; a local plan without changes ends the run). */
  hasChanges?: boolean;
  /** A local run has waited for its pipeline's report longer than the local execution timeout. */
  reportOverdue?: boolean;
}

export interface StageSnapshot {
  stage: RunStage;
  status: TaskStageStatus;
  /** Set when a person overrode this stage (it went awaiting_override → running). */
  overridden: boolean;
  /** evaluateStage over its results. */
  evaluation: StageEvaluation | null;
}

/** What the worker does next for a run; applied one at a time until `wait`. */
export type RunStep =
  | { kind: 'wait' }
  | { kind: 'set-run'; status: RunStatus }
  | { kind: 'start-stage'; stage: RunStage; runStatus: RunStatus }
  | { kind: 'finish-stage'; stage: RunStage; stageStatus: TaskStageStatus; runStatus: RunStatus; warning: boolean }
  | { kind: 'plan' }
  | { kind: 'apply' }
  /** A local run's pipeline did not report its plan or apply in time: the run ends errored. */
  | { kind: 'report-overdue'; awaited: 'planning' | 'applying' };

const RUNNING: Record<RunStage, RunStatus> = {
  pre_plan: 'pre_plan_running',
  post_plan: 'post_plan_running',
  pre_apply: 'pre_apply_running',
  post_apply: 'post_apply_running',
};
const COMPLETED: Record<RunStage, RunStatus> = {
  pre_plan: 'pre_plan_completed',
  post_plan: 'post_plan_completed',
  pre_apply: 'pre_apply_completed',
  post_apply: 'post_apply_completed',
};
const AWAITING: Partial<Record<RunStage, RunStatus>> = {
  pre_plan: 'pre_plan_awaiting_decision',
  post_plan: 'post_plan_awaiting_decision',
  pre_apply: 'pre_apply_awaiting_decision',
};

const WAIT: RunStep = { kind: 'wait' };

function stageOf(status: RunStatus, table: Partial<Record<RunStage, RunStatus>>): RunStage | undefined {
  return (Object.keys(table) as RunStage[]).find((stage) => table[stage] === status);
}

/**
 * After planning (and post_plan): plan-only runs finish, auto-apply confirms, the rest wait for a person.
 * A reported plan without changes finishes the run too, as HCP ends a plan with nothing to apply
 * (`planned_and_finished`); its post_plan tasks have run first, as they do for every plan.
 */
function afterPlan(run: RunSnapshot): RunStep {
  if (run.planOnly || noChanges(run)) return { kind: 'set-run', status: 'planned_and_finished' };
  if (run.autoApply) return { kind: 'set-run', status: 'confirmed' };
  return WAIT;
}

/** What follows a run stage once it passed, or when the run has no tasks on it. */
function after(stage: RunStage, run: RunSnapshot): RunStep {
  switch (stage) {
    case 'pre_plan':
      return { kind: 'set-run', status: 'planning' };
    case 'post_plan':
      return afterPlan(run);
    case 'pre_apply':
      return { kind: 'set-run', status: 'applying' };
    case 'post_apply':
      return WAIT;
  }
}

/** A local run's reported plan changes nothing (the built-in executor's plans always go on to apply, as they did before plans were reported). */
const noChanges = (run: RunSnapshot): boolean => run.executionMode === 'local' && run.hasChanges === false;

/** Planning or applying: the built-in executor does it now; a local run waits for its pipeline's report, until the timeout. */
function execute(awaited: 'planning' | 'applying', run: RunSnapshot): RunStep {
  if (run.executionMode !== 'local') return { kind: awaited === 'planning' ? 'plan' : 'apply' };
  return run.reportOverdue === true ? { kind: 'report-overdue', awaited } : WAIT;
}

function enter(stage: RunStage, run: RunSnapshot, stages: ReadonlyMap<RunStage, StageSnapshot>): RunStep {
  const snapshot = stages.get(stage);
  if (snapshot && !FINAL_STAGE_STATUSES.has(snapshot.status)) return { kind: 'start-stage', stage, runStatus: RUNNING[stage] };
  return after(stage, run);
}

/** A stage in progress: wait for its results, then pass it, hold it for an override, or stop the run. */
function progress(stage: RunStage, run: RunSnapshot, snapshot: StageSnapshot | undefined): RunStep {
  if (!snapshot) return { kind: 'set-run', status: COMPLETED[stage] };
  if (snapshot.status === 'pending') return { kind: 'start-stage', stage, runStatus: RUNNING[stage] };
  if (snapshot.status === 'passed') return { kind: 'set-run', status: COMPLETED[stage] };
  if (snapshot.status === 'awaiting_override') return { kind: 'set-run', status: AWAITING[stage] ?? 'errored' };
  if (FINAL_STAGE_STATUSES.has(snapshot.status)) return { kind: 'set-run', status: stage === 'post_apply' ? COMPLETED[stage] : 'errored' };
  const evaluation = snapshot.evaluation;
  if (!evaluation) return WAIT;
  if (snapshot.overridden || evaluation.status === 'passed') {
    return {
      kind: 'finish-stage',
      stage,
      stageStatus: 'passed',
      runStatus: COMPLETED[stage],
      warning: evaluation.warning || snapshot.overridden,
    };
  }
  const awaiting = AWAITING[stage];
  // Speculative runs are never held; a canceled stage is never overridable.
  if (run.overridesEnabled && !run.planOnly && awaiting && evaluation.status !== 'canceled') {
    return { kind: 'finish-stage', stage, stageStatus: 'awaiting_override', runStatus: awaiting, warning: evaluation.warning };
  }
  return { kind: 'finish-stage', stage, stageStatus: evaluation.status, runStatus: 'errored', warning: evaluation.warning };
}

/**
 * The run lifecycle of DESIGN §3 as one pure decision: given the run and its stages, the next step.
 * pending → pre_plan → planning → planned → post_plan → (plan-only: planned_and_finished) → confirmed →
 * pre_apply → applying → applied → post_apply. Stages without tasks are skipped.
 */
export function nextRunStep(run: RunSnapshot, stageList: readonly StageSnapshot[]): RunStep {
  const stages = new Map(stageList.map((stage) => [stage.stage, stage]));
  switch (run.status) {
    case 'pending':
      return enter('pre_plan', run, stages);
    case 'planning':
      return execute('planning', run);
    case 'planned':
      return enter('post_plan', run, stages);
    case 'confirmed':
      return run.planOnly ? { kind: 'set-run', status: 'errored' } : enter('pre_apply', run, stages);
    case 'applying':
      return execute('applying', run);
    case 'applied':
      return enter('post_apply', run, stages);
    case 'pre_plan_running':
    case 'post_plan_running':
    case 'pre_apply_running':
    case 'post_apply_running': {
      const stage = stageOf(run.status, RUNNING) as RunStage;
      return progress(stage, run, stages.get(stage));
    }
    case 'pre_plan_awaiting_decision':
    case 'post_plan_awaiting_decision':
    case 'pre_apply_awaiting_decision': {
      const stage = stageOf(run.status, AWAITING) as RunStage;
      const snapshot = stages.get(stage);
      if (snapshot?.status === 'awaiting_override') return WAIT;
      return progress(stage, run, snapshot);
    }
    case 'pre_plan_completed':
      return after('pre_plan', run);
    case 'post_plan_completed':
      return after('post_plan', run);
    case 'pre_apply_completed':
      return after('pre_apply', run);
    case 'post_apply_completed':
    case 'planned_and_finished':
    case 'discarded':
    case 'errored':
    case 'canceled':
      return WAIT;
  }
}

/** Runs the worker must not move on its own: final, or waiting for a person. */
export function isRunWaitingOrFinal(run: RunSnapshot, stageList: readonly StageSnapshot[]): boolean {
  return nextRunStep(run, stageList).kind === 'wait';
}

/** A stage a new run starts in as it is created, with the run's status then. */
export interface StageStart {
  stage: RunStage;
  runStatus: RunStatus;
}

/**
 * The stage a run starts as it is created, when its first step is to start one (it has pre_plan
 * tasks): the creation takes that step itself, and the worker has only the stage's first attempts to
 * claim and deliver instead of an advance to make. Any other first step
 * (planning, which is the worker's) leaves the run `pending` for the worker. `stages` are the run
 * stages planned with tasks.
 */
export function stageStartedAtCreation(run: Omit<RunSnapshot, 'status'>, stages: readonly RunStage[]): StageStart | undefined {
  const step = nextRunStep(
    { ...run, status: 'pending' },
    stages.map((stage) => ({ stage, status: 'pending', overridden: false, evaluation: null })),
  );
  return step.kind === 'start-stage' ? { stage: step.stage, runStatus: step.runStatus } : undefined;
}
