// The model side of lifecycle.model.test.ts: HCP's rules as a cursor over a run's phases.
import { type RunAction } from './run-transitions.ts';
import {
  RUN_STAGES,
  type EnforcementLevel,
  type RunStage,
  type RunStatus,
  type TaskResultStatus,
  type TaskStageStatus,
} from './statuses.ts';

export type Level = EnforcementLevel;

export interface Setup {
  planOnly: boolean;
  autoApply: boolean;
  overridesEnabled: boolean;
  /** The enforcement level of each task per stage; a stage without tasks is absent (as the planner leaves it). */
  tasks: Partial<Record<RunStage, Level[]>>;
}

// ---------------------------------------------------------------------------------------------
// The model: a cursor over the phases of a run.

export const PHASES = ['pre_plan', 'plan', 'post_plan', 'confirm', 'pre_apply', 'apply', 'post_apply', 'done'] as const;
export type Phase = (typeof PHASES)[number];
export const TASK_PHASES: readonly Phase[] = RUN_STAGES;
export const isTaskPhase = (phase: Phase): phase is RunStage => TASK_PHASES.includes(phase);

export type Ending = 'errored' | 'canceled' | 'discarded' | 'planned_and_finished' | 'applied' | 'post_apply_completed';

export interface ModelResult {
  level: Level;
  status: TaskResultStatus;
}
export interface ModelStage {
  status: TaskStageStatus;
  overridden: boolean;
  results: ModelResult[];
}
export interface Model {
  setup: Setup;
  phase: number;
  /** The run is held at a task phase for a person (its stage awaits an override). */
  held: boolean;
  ending: Ending | null;
  warnings: boolean;
  stages: Partial<Record<RunStage, ModelStage>>;
}

export const stillOpen = (status: TaskResultStatus): boolean => status === 'pending' || status === 'running';

/** HCP's stage verdict: undecided while a result is open; the worst mandatory outcome; advisory (and all of post_apply) only warn. */
export function modelVerdict(stage: RunStage, results: readonly ModelResult[]): { outcome: TaskStageStatus; warning: boolean } | null {
  if (results.some((result) => stillOpen(result.status))) return null;
  const blocks = (result: ModelResult): boolean => result.level === 'mandatory' && stage !== 'post_apply';
  const blocking = new Set(results.filter(blocks).map((result) => result.status));
  let outcome: TaskStageStatus = 'passed';
  for (const worst of ['unreachable', 'errored', 'failed', 'canceled'] as const) if (blocking.has(worst)) outcome = worst;
  return { outcome, warning: results.some((result) => !blocks(result) && result.status !== 'passed') };
}

/** What the run's status reads as, from where the cursor is. */
export function modelRunStatus(model: Model): RunStatus {
  if (model.ending) return model.ending;
  const phase = PHASES[model.phase] as Phase;
  if (isTaskPhase(phase)) return model.held ? (`${phase}_awaiting_decision` as RunStatus) : (`${phase}_running` as RunStatus);
  // At rest outside a task phase the run can only be waiting for confirmation.
  if (phase === 'confirm') return model.stages.post_plan ? 'post_plan_completed' : 'planned';
  throw new Error(`the model rests at ${phase}`);
}

/** Ends the run: every stage it never got to (and, when a person ended it, every open one) ends canceled. */
export function endModel(model: Model, ending: Ending, byPerson: boolean): void {
  model.ending = ending;
  model.held = false;
  for (const stage of Object.values(model.stages)) {
    const endsNow = stage.status === 'pending' || (byPerson && (stage.status === 'running' || stage.status === 'awaiting_override'));
    if (!endsNow) continue;
    for (const result of stage.results)
      if (stillOpen(result.status) && (byPerson || result.status === 'pending')) result.status = 'canceled';
    stage.status = 'canceled';
  }
}

/** Moves the cursor as far as the rules let the run go without anything from outside. */
export function settle(model: Model): void {
  for (let guard = 0; guard < 50; guard += 1) {
    if (model.ending || model.held) return;
    const phase = PHASES[model.phase] as Phase;
    if (isTaskPhase(phase)) {
      const stage = model.stages[phase];
      if (!stage) {
        model.phase += 1;
        continue;
      }
      if (stage.status === 'pending') stage.status = 'running';
      const verdict = modelVerdict(phase, stage.results);
      if (!verdict) return;
      if (verdict.outcome === 'passed' || stage.overridden) {
        stage.status = 'passed';
        model.warnings ||= verdict.warning || stage.overridden;
        model.phase += 1;
        continue;
      }
      model.warnings ||= verdict.warning;
      const { overridesEnabled, planOnly } = model.setup;
      if (overridesEnabled && !planOnly && phase !== 'post_apply' && verdict.outcome !== 'canceled') {
        stage.status = 'awaiting_override';
        model.held = true;
        return;
      }
      stage.status = verdict.outcome;
      endModel(model, 'errored', false);
      return;
    }
    switch (phase) {
      case 'plan':
      case 'apply':
        model.phase += 1;
        continue;
      case 'confirm':
        if (model.setup.planOnly) return endModel(model, 'planned_and_finished', false);
        if (!model.setup.autoApply) return;
        model.phase += 1;
        continue;
      case 'done':
        endModel(model, model.stages.post_apply ? 'post_apply_completed' : 'applied', false);
        return;
    }
  }
  throw new Error('the model never came to rest');
}

/** Which actions a person may take now (HCP: cancel work in progress, discard what waits for a person, apply a plan that waits). */
export function modelAllows(model: Model, action: RunAction): boolean {
  if (model.ending) return false;
  const phase = PHASES[model.phase] as Phase;
  const waitsForConfirmation = phase === 'confirm';
  switch (action) {
    case 'apply':
      return waitsForConfirmation && !model.setup.planOnly;
    case 'discard':
      // And a plan whose post_plan tasks are running (HCP's discardable group has post_plan_running).
      return waitsForConfirmation || model.held || phase === 'post_plan';
    case 'cancel':
      // Tasks running before the apply can be canceled; post_apply runs after the apply and cannot.
      return isTaskPhase(phase) && !model.held && phase !== 'post_apply';
  }
}
