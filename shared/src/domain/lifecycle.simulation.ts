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

/** A run, its stages and the people around it, played by the same rules the worker follows. */
class RunModel {
  readonly run: RunSnapshot;
  readonly stages: ModelStage[];
  readonly sim: Simulation;

  private readonly setup: RunSetup;

  constructor(setup: RunSetup) {
    this.setup = setup;
    this.run = { status: 'pending', planOnly: setup.planOnly, autoApply: setup.autoApply, overridesEnabled: setup.overridesEnabled };
    this.stages = setup.stages.map(({ stage, results }) => ({
      stage,
      status: 'pending',
      overridden: false,
      results: results.map((result) => ({ ...result, status: 'pending' })),
    }));
    this.sim = {
      history: ['pending'],
      waitedAt: [],
      final: this.run,
      stages: new Map(),
      warning: false,
      plans: 0,
      applies: 0,
      steps: 0,
      longestAdvance: 0,
    };
  }

  snapshots(): StageSnapshot[] {
    return this.stages.map((stage) => ({
      stage: stage.stage,
      status: stage.status,
      overridden: stage.overridden,
      evaluation: evaluateStage(stage.stage, stage.results),
    }));
  }

  /** The worker: apply steps until `wait`, never more than MAX_STEPS at once. */
  advance(): void {
    let count = 0;
    for (let step = nextRunStep(this.run, this.snapshots()); step.kind !== 'wait'; step = nextRunStep(this.run, this.snapshots())) {
      count += 1;
      if (count > MAX_STEPS) throw new Error(`more than ${MAX_STEPS} steps without waiting: ${this.sim.history.join(' → ')}`);
      this.apply(step);
    }
    this.sim.steps += count;
    this.sim.longestAdvance = Math.max(this.sim.longestAdvance, count);
  }

  /** Tasks report, or a person acts; false when nothing more will happen. */
  world(): boolean {
    const open = this.stages.flatMap((stage) => stage.results).filter((result) => result.status === 'running');
    if (open.length > 0) {
      for (const result of this.setup.oneResultPerTurn ? open.slice(0, 1) : open) result.status = result.outcome;
      return true;
    }
    this.sim.waitedAt.push(this.run.status);
    const held = this.stages.find((stage) => stage.status === 'awaiting_override');
    if (held && this.run.status.endsWith('_awaiting_decision')) {
      if (this.setup.person?.onHeld === 'override') {
        // POST /task-stages/:id/actions/override: awaiting_override → running.
        held.status = 'running';
        held.overridden = true;
        return true;
      }
      if (this.setup.person?.onHeld === 'discard') return this.act('discard');
      return false;
    }
    if (this.setup.person?.onPlanned && runActionTarget('apply', this.run) !== null) return this.act(this.setup.person.onPlanned);
    return false;
  }

  private apply(step: Exclude<ReturnType<typeof nextRunStep>, { kind: 'wait' }>): void {
    switch (step.kind) {
      case 'set-run':
        this.setStatus(step.status);
        break;
      case 'plan':
        this.sim.plans += 1;
        this.setStatus('planned');
        break;
      case 'apply':
        this.sim.applies += 1;
        this.setStatus('applied');
        break;
      case 'start-stage': {
        const stage = this.stageNamed(step.stage);
        if (stage.status === 'pending') stage.status = 'running';
        for (const result of stage.results) if (result.status === 'pending') result.status = 'running';
        this.setStatus(step.runStatus);
        break;
      }
      case 'finish-stage':
        this.stageNamed(step.stage).status = step.stageStatus;
        if (step.warning) this.sim.warning = true;
        this.setStatus(step.runStatus);
        break;
    }
  }

  private act(action: 'apply' | 'discard'): boolean {
    const target = runActionTarget(action, this.run);
    if (target === null) return false;
    this.setStatus(target);
    return true;
  }

  private setStatus(status: RunStatus): void {
    this.run.status = status;
    this.sim.history.push(status);
  }

  private stageNamed(name: RunStage): ModelStage {
    const stage = this.stages.find((candidate) => candidate.stage === name);
    if (!stage) throw new Error(`step names ${name}, which the run does not have`);
    return stage;
  }
}

export function simulate(setup: RunSetup): Simulation {
  const model = new RunModel(setup);
  for (let turn = 0; ; turn += 1) {
    if (turn > 100) throw new Error(`the run never settles: ${model.sim.history.join(' → ')}`);
    model.advance();
    if (!model.world()) break;
  }
  model.sim.stages = new Map(model.stages.map((stage) => [stage.stage, stage.status]));
  model.sim.final = { ...model.run };
  expect(isRunWaitingOrFinal(model.run, model.snapshots())).toBe(true);
  return model.sim;
}

export type StageSetup = RunSetup['stages'][number];
export const stageWith = (stage: RunStage, ...results: [EnforcementLevel, Outcome][]): StageSetup => ({
  stage,
  results: results.map(([enforcementLevel, outcome]) => ({ enforcementLevel, outcome })),
});
export const allPassing = (): StageSetup[] => RUN_STAGES.map((stage) => stageWith(stage, ['mandatory', 'passed'], ['advisory', 'passed']));
export const manual: Flags = { planOnly: false, autoApply: false, overridesEnabled: false };
export const auto: Flags = { ...manual, autoApply: true };
