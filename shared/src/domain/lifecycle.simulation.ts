// Whole runs played on an in-memory model, step by step through nextRunStep, for the lifecycle tests.
import { expect } from '@jest/globals';
import { evaluateStage, isRunWaitingOrFinal, nextRunStep, type RunSnapshot, type StageSnapshot } from './lifecycle.ts';
import { runActionTarget } from './run-transitions.ts';
import {
  RUN_STAGES,
  type EnforcementLevel,
  type RunStage,
  type RunStatus,
  type TaskResultStatus,
  type TaskStageStatus,
} from './statuses.ts';
import { type Flags } from './lifecycle.reference.ts';

// ---------------------------------------------------------------------------------------------
// Whole runs on an in-memory model
// ---------------------------------------------------------------------------------------------

export type Outcome = Exclude<TaskResultStatus, 'pending' | 'running'>;

export interface ModelResult {
  status: TaskResultStatus;
  enforcementLevel: EnforcementLevel;
  /** What the task will report once it runs. */
  outcome: Outcome;
}

export interface ModelStage {
  stage: RunStage;
  status: TaskStageStatus;
  overridden: boolean;
  results: ModelResult[];
}

export interface Person {
  /** On a held stage: override it, discard the run, or leave it waiting. */
  onHeld?: 'override' | 'discard';
  /** On a planned run waiting for confirmation: apply, discard, or leave it. */
  onPlanned?: 'apply' | 'discard';
}

export interface RunSetup extends Flags {
  stages: { stage: RunStage; results: { enforcementLevel: EnforcementLevel; outcome: Outcome }[] }[];
  person?: Person;
  /** Report one open result per turn instead of all of them at once. */
  oneResultPerTurn?: boolean;
}

export interface Simulation {
  history: RunStatus[];
  /** Statuses at which the worker waited for a person. */
  waitedAt: RunStatus[];
  final: RunSnapshot;
  stages: Map<RunStage, TaskStageStatus>;
  warning: boolean;
  plans: number;
  applies: number;
  /** Worker steps over the whole run, and the most in one uninterrupted advance. */
  steps: number;
  longestAdvance: number;
}

export const MAX_STEPS = 32;

export function simulate(setup: RunSetup): Simulation {
  const run: RunSnapshot = {
    status: 'pending',
    planOnly: setup.planOnly,
    autoApply: setup.autoApply,
    overridesEnabled: setup.overridesEnabled,
  };
  const stages: ModelStage[] = setup.stages.map(({ stage, results }) => ({
    stage,
    status: 'pending',
    overridden: false,
    results: results.map((result) => ({ ...result, status: 'pending' })),
  }));
  const sim: Simulation = {
    history: ['pending'],
    waitedAt: [],
    final: run,
    stages: new Map(),
    warning: false,
    plans: 0,
    applies: 0,
    steps: 0,
    longestAdvance: 0,
  };
  const setStatus = (status: RunStatus): void => {
    run.status = status;
    sim.history.push(status);
  };
  const snapshots = (): StageSnapshot[] =>
    stages.map((stage) => ({
      stage: stage.stage,
      status: stage.status,
      overridden: stage.overridden,
      evaluation: evaluateStage(stage.stage, stage.results),
    }));
  const stageNamed = (name: RunStage): ModelStage => {
    const stage = stages.find((candidate) => candidate.stage === name);
    if (!stage) throw new Error(`step names ${name}, which the run does not have`);
    return stage;
  };

  /** The worker: apply steps until `wait`, never more than MAX_STEPS at once. */
  const advance = (): void => {
    let count = 0;
    for (let step = nextRunStep(run, snapshots()); step.kind !== 'wait'; step = nextRunStep(run, snapshots())) {
      count += 1;
      if (count > MAX_STEPS) throw new Error(`more than ${MAX_STEPS} steps without waiting: ${sim.history.join(' → ')}`);
      switch (step.kind) {
        case 'set-run':
          setStatus(step.status);
          break;
        case 'plan':
          sim.plans += 1;
          setStatus('planned');
          break;
        case 'apply':
          sim.applies += 1;
          setStatus('applied');
          break;
        case 'start-stage': {
          const stage = stageNamed(step.stage);
          if (stage.status === 'pending') stage.status = 'running';
          for (const result of stage.results) if (result.status === 'pending') result.status = 'running';
          setStatus(step.runStatus);
          break;
        }
        case 'finish-stage':
          stageNamed(step.stage).status = step.stageStatus;
          if (step.warning) sim.warning = true;
          setStatus(step.runStatus);
          break;
      }
    }
    sim.steps += count;
    sim.longestAdvance = Math.max(sim.longestAdvance, count);
  };

  /** Tasks report, or a person acts; false when nothing more will happen. */
  const world = (): boolean => {
    const open = stages.flatMap((stage) => stage.results).filter((result) => result.status === 'running');
    if (open.length > 0) {
      for (const result of setup.oneResultPerTurn ? open.slice(0, 1) : open) result.status = result.outcome;
      return true;
    }
    sim.waitedAt.push(run.status);
    const held = stages.find((stage) => stage.status === 'awaiting_override');
    if (held && run.status.endsWith('_awaiting_decision')) {
      if (setup.person?.onHeld === 'override') {
        // POST /task-stages/:id/actions/override: awaiting_override → running.
        held.status = 'running';
        held.overridden = true;
        return true;
      }
      if (setup.person?.onHeld === 'discard') return act('discard');
      return false;
    }
    if (setup.person?.onPlanned && runActionTarget('apply', run) !== null) return act(setup.person.onPlanned);
    return false;
  };
  const act = (action: 'apply' | 'discard'): boolean => {
    const target = runActionTarget(action, run);
    if (target === null) return false;
    setStatus(target);
    return true;
  };

  for (let turn = 0; ; turn += 1) {
    if (turn > 100) throw new Error(`the run never settles: ${sim.history.join(' → ')}`);
    advance();
    if (!world()) break;
  }
  sim.stages = new Map(stages.map((stage) => [stage.stage, stage.status]));
  sim.final = { ...run };
  expect(isRunWaitingOrFinal(run, snapshots())).toBe(true);
  return sim;
}

export type StageSetup = RunSetup['stages'][number];
export const stageWith = (stage: RunStage, ...results: [EnforcementLevel, Outcome][]): StageSetup => ({
  stage,
  results: results.map(([enforcementLevel, outcome]) => ({ enforcementLevel, outcome })),
});
export const allPassing = (): StageSetup[] => RUN_STAGES.map((stage) => stageWith(stage, ['mandatory', 'passed'], ['advisory', 'passed']));
export const manual: Flags = { planOnly: false, autoApply: false, overridesEnabled: false };
export const auto: Flags = { ...manual, autoApply: true };
