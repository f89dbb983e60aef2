// The commands of lifecycle.model.test.ts, and the agreement checked after each of them.
import type fc from 'fast-check';
import { expect } from '@jest/globals';
import { evaluateStage, isRunWaitingOrFinal } from './lifecycle.ts';
import { RUN_ACTIONS, runActionTarget, type RunAction } from './run-transitions.ts';
import { FINAL_RUN_STATUSES, type RunStage, type RunStatus, type TaskResultStatus, type TaskStageStatus } from './statuses.ts';
import { statusTimestampKey } from './timestamps.ts';
import {
  PHASES,
  type Phase,
  isTaskPhase,
  type ModelResult,
  type ModelStage,
  type Model,
  stillOpen,
  modelVerdict,
  modelRunStatus,
  endModel,
  settle,
  modelAllows,
} from './lifecycle.hcp-model.ts';
import { type RealStage, type Real, snapshots, drive, realAction } from './lifecycle.real.ts';

// ---------------------------------------------------------------------------------------------
// Agreement after every command.

export const FINAL_STAGE: ReadonlySet<TaskStageStatus> = new Set(['passed', 'failed', 'errored', 'canceled', 'unreachable']);

export interface Observed {
  run: RunStatus;
  warnings: boolean;
  stages: Partial<Record<RunStage, TaskStageStatus>>;
  results: Partial<Record<RunStage, TaskResultStatus[]>>;
}

export const observeReal = (real: Real): Observed => ({
  run: real.run.status,
  warnings: real.warnings,
  stages: Object.fromEntries([...real.stages].map(([stage, s]) => [stage, s.status])),
  results: Object.fromEntries([...real.stages].map(([stage, s]) => [stage, s.results.map((result) => result.status)])),
});
export const observeModel = (model: Model): Observed => ({
  run: modelRunStatus(model),
  warnings: model.warnings,
  stages: Object.fromEntries(Object.entries(model.stages).map(([stage, s]) => [stage, s.status])),
  results: Object.fromEntries(Object.entries(model.stages).map(([stage, s]) => [stage, s.results.map((result) => result.status)])),
});

/** Every status a run came to rest in, over all sequences: what the commands reached. */
export const restedAt = new Set<RunStatus>();

export function expectAgreement(model: Model, real: Real, before: Observed | null, what: string): void {
  const observed = observeReal(real);
  restedAt.add(observed.run);
  expect({ what, ...observed }).toEqual({ what, ...observeModel(model) });
  expect(isRunWaitingOrFinal(real.run, snapshots(real))).toBe(true);
  for (const [stage, snapshot] of real.stages) {
    const verdict = modelVerdict(stage, (model.stages[stage] as ModelStage).results);
    const evaluation = evaluateStage(stage, snapshot.results);
    expect({ what, stage, evaluation }).toEqual({
      what,
      stage,
      evaluation: verdict && { status: verdict.outcome, warning: verdict.warning },
    });
  }
  for (const action of RUN_ACTIONS) {
    expect({ what, action, allowed: runActionTarget(action, real.run) !== null }).toEqual({
      what,
      action,
      allowed: modelAllows(model, action),
    });
  }
  if (before) {
    // Nothing leaves a final status: the run's, a stage's, a result's.
    if (FINAL_RUN_STATUSES.has(before.run)) expect({ what, run: observed.run }).toEqual({ what, run: before.run });
    for (const [stage, status] of Object.entries(before.stages) as [RunStage, TaskStageStatus][]) {
      if (FINAL_STAGE.has(status)) expect({ what, stage, status: observed.stages[stage] }).toEqual({ what, stage, status });
    }
    for (const [stage, statuses] of Object.entries(before.results) as [RunStage, TaskResultStatus[]][]) {
      statuses.forEach((status, index) => {
        if (!stillOpen(status))
          expect({ what, stage, index, status: observed.results[stage]?.[index] }).toEqual({ what, stage, index, status });
      });
    }
  }
  // Every status the run is in was stamped when it entered it, and only then.
  expect(real.timestamps.has(statusTimestampKey(real.run.status))).toBe(true);
}

// ---------------------------------------------------------------------------------------------
// Commands.

export type ResultEvent = 'callback-running' | 'callback-passed' | 'callback-failed' | 'deadline' | 'unreachable';
export const EVENT_STATUS: Record<ResultEvent, TaskResultStatus> = {
  'callback-running': 'running',
  'callback-passed': 'passed',
  'callback-failed': 'failed',
  // The sweeper: no progress before the deadline → errored.
  deadline: 'errored',
  // Every delivery attempt failed.
  unreachable: 'unreachable',
};

export type Command = fc.Command<Model, Real>;

/** Something happens to one result of a stage the run has started (its task has the token). */
export class ResultCommand implements Command {
  readonly stage: RunStage;
  readonly index: number;
  readonly event: ResultEvent;
  constructor(stage: RunStage, index: number, event: ResultEvent) {
    this.stage = stage;
    this.index = index;
    this.event = event;
  }
  check(model: Readonly<Model>): boolean {
    const stage = model.stages[this.stage];
    return stage !== undefined && stage.status !== 'pending' && this.index < stage.results.length;
  }
  run(model: Model, real: Real): void {
    const before = observeReal(real);
    const status = EVENT_STATUS[this.event];
    const modelResult = (model.stages[this.stage] as ModelStage).results[this.index] as ModelResult;
    // A final result never changes (the API answers 409; the sweeper skips it).
    if (stillOpen(modelResult.status)) {
      modelResult.status = status;
      settle(model);
    }
    const realResult = (real.stages.get(this.stage) as RealStage).results[this.index] as RealStage['results'][number];
    if (realResult.status === 'pending' || realResult.status === 'running') {
      realResult.status = status;
      // The last open result of a stage wakes the run; any other changes nothing until then.
      drive(real);
    }
    expectAgreement(model, real, before, this.toString());
  }
  toString(): string {
    return `${this.event}(${this.stage}#${this.index})`;
  }
}

/** The same, to a result of the stage the run is at now: most sequences then get far into the lifecycle. */
export class CurrentResultCommand implements Command {
  readonly index: number;
  readonly event: ResultEvent;
  constructor(index: number, event: ResultEvent) {
    this.index = index;
    this.event = event;
  }
  private target(model: Readonly<Model>): ResultCommand | null {
    const phase = PHASES[model.phase] as Phase;
    if (model.ending || model.held || !isTaskPhase(phase)) return null;
    const stage = model.stages[phase];
    return stage && stage.results.length > 0 ? new ResultCommand(phase, this.index % stage.results.length, this.event) : null;
  }
  check(model: Readonly<Model>): boolean {
    return this.target(model) !== null;
  }
  run(model: Model, real: Real): void {
    (this.target(model) as ResultCommand).run(model, real);
  }
  toString(): string {
    return `${this.event}(current stage #${this.index})`;
  }
}

export class OverrideCommand implements Command {
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const before = observeReal(real);
    const held = model.held ? (PHASES[model.phase] as RunStage) : null;
    if (held) {
      const stage = model.stages[held] as ModelStage;
      stage.status = 'running';
      stage.overridden = true;
      model.held = false;
      settle(model);
    }
    // The API: one conditional update, awaiting_override → running, while the run awaits the decision.
    const awaiting = [...real.stages].find(([, stage]) => stage.status === 'awaiting_override');
    if (awaiting && real.run.status.endsWith('_awaiting_decision')) {
      awaiting[1].status = 'running';
      awaiting[1].overridden = true;
      drive(real);
    }
    expect({ overridden: awaiting?.[0] ?? null }).toEqual({ overridden: held });
    expectAgreement(model, real, before, this.toString());
  }
  toString(): string {
    return 'override';
  }
}

export class ActionCommand implements Command {
  readonly action: RunAction;
  constructor(action: RunAction) {
    this.action = action;
  }
  check(): boolean {
    return true;
  }
  run(model: Model, real: Real): void {
    const before = observeReal(real);
    const allowed = modelAllows(model, this.action);
    if (allowed) {
      if (this.action === 'apply') {
        model.phase += 1;
        settle(model);
      } else {
        endModel(model, this.action === 'cancel' ? 'canceled' : 'discarded', true);
      }
    }
    expect({ action: this.action, done: realAction(real, this.action) }).toEqual({ action: this.action, done: allowed });
    expectAgreement(model, real, before, this.toString());
  }
  toString(): string {
    return this.action;
  }
}
