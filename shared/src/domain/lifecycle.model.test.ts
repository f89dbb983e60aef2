import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { evaluateStage, isRunWaitingOrFinal, nextRunStep, type RunSnapshot, type StageSnapshot } from './lifecycle.ts';
import { RUN_ACTIONS, runActionTarget, type RunAction } from './run-transitions.ts';
import {
  FINAL_RUN_STATUSES,
  RUN_STAGES,
  type EnforcementLevel,
  type RunStage,
  type RunStatus,
  type TaskResultStatus,
  type TaskStageStatus,
} from './statuses.ts';
import { statusTimestampKey } from './timestamps.ts';

/**
 * Model-based test of the run lifecycle: random sequences of what can
 * happen to a run from outside — a task's callback, a deadline, a delivery that fails, an override,
 * apply, cancel, discard — are applied both to
 *
 * - the real pure rules (nextRunStep driven step by step until it says `wait`, evaluateStage for
 *   every stage, runActionTarget for the three actions), with the same bookkeeping the API and the
 *   worker do around them in SQL (a callback only moves an open result; cancel and discard end open
 *   results and stages; a run that ended cancels the stages it never started), and
 * - a small model of HCP's rules (docs/design.md, "How a run moves") written here in a different shape: a cursor over the
 *   run's phases instead of a status switch,
 *
 * and after every command the two must agree on the run status, every stage status, the warning
 * flag, every stage's verdict and which actions are allowed. Also: nothing moves out of a final
 * status, a run never enters a status twice (its status timestamp is written once), and driving the
 * rules always comes to rest.
 */

type Level = EnforcementLevel;

interface Setup {
  planOnly: boolean;
  autoApply: boolean;
  overridesEnabled: boolean;
  /** The enforcement level of each task per stage; a stage without tasks is absent (as the planner leaves it). */
  tasks: Partial<Record<RunStage, Level[]>>;
}

// ---------------------------------------------------------------------------------------------
// The model: a cursor over the phases of a run.

const PHASES = ['pre_plan', 'plan', 'post_plan', 'confirm', 'pre_apply', 'apply', 'post_apply', 'done'] as const;
type Phase = (typeof PHASES)[number];
const TASK_PHASES: readonly Phase[] = RUN_STAGES;
const isTaskPhase = (phase: Phase): phase is RunStage => TASK_PHASES.includes(phase);

type Ending = 'errored' | 'canceled' | 'discarded' | 'planned_and_finished' | 'applied' | 'post_apply_completed';

interface ModelResult {
  level: Level;
  status: TaskResultStatus;
}
interface ModelStage {
  status: TaskStageStatus;
  overridden: boolean;
  results: ModelResult[];
}
interface Model {
  setup: Setup;
  phase: number;
  /** The run is held at a task phase for a person (its stage awaits an override). */
  held: boolean;
  ending: Ending | null;
  warnings: boolean;
  stages: Partial<Record<RunStage, ModelStage>>;
}

const stillOpen = (status: TaskResultStatus): boolean => status === 'pending' || status === 'running';

/** HCP's stage verdict: undecided while a result is open; the worst mandatory outcome; advisory (and all of post_apply) only warn. */
function modelVerdict(stage: RunStage, results: readonly ModelResult[]): { outcome: TaskStageStatus; warning: boolean } | null {
  if (results.some((result) => stillOpen(result.status))) return null;
  const blocks = (result: ModelResult): boolean => result.level === 'mandatory' && stage !== 'post_apply';
  const blocking = new Set(results.filter(blocks).map((result) => result.status));
  let outcome: TaskStageStatus = 'passed';
  for (const worst of ['unreachable', 'errored', 'failed', 'canceled'] as const) if (blocking.has(worst)) outcome = worst;
  return { outcome, warning: results.some((result) => !blocks(result) && result.status !== 'passed') };
}

/** What the run's status reads as, from where the cursor is. */
function modelRunStatus(model: Model): RunStatus {
  if (model.ending) return model.ending;
  const phase = PHASES[model.phase] as Phase;
  if (isTaskPhase(phase)) return model.held ? (`${phase}_awaiting_decision` as RunStatus) : (`${phase}_running` as RunStatus);
  // At rest outside a task phase the run can only be waiting for confirmation.
  if (phase === 'confirm') return model.stages.post_plan ? 'post_plan_completed' : 'planned';
  throw new Error(`the model rests at ${phase}`);
}

/** Ends the run: every stage it never got to (and, when a person ended it, every open one) ends canceled. */
function endModel(model: Model, ending: Ending, byPerson: boolean): void {
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
function settle(model: Model): void {
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
function modelAllows(model: Model, action: RunAction): boolean {
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

// ---------------------------------------------------------------------------------------------
// The real side: the pure rules, and the bookkeeping the API and the worker do around them.

interface RealStage {
  status: TaskStageStatus;
  overridden: boolean;
  results: { enforcementLevel: Level; status: TaskResultStatus }[];
}
interface Real {
  run: RunSnapshot;
  warnings: boolean;
  stages: Map<RunStage, RealStage>;
  /** status-timestamps of the run: key → the step that set it. */
  timestamps: Map<string, number>;
  clock: number;
}

/** The engine's ENDED_RUNS (advance-decision.ts): runs that will not move again; their unstarted stages end. */
const ENDED: ReadonlySet<RunStatus> = new Set(['errored', 'planned_and_finished', 'post_apply_completed', 'canceled', 'discarded']);

function enterRunStatus(real: Real, status: RunStatus): void {
  const key = statusTimestampKey(status);
  if (real.timestamps.has(key)) throw new Error(`the run entered ${status} a second time`);
  real.clock += 1;
  real.timestamps.set(key, real.clock);
  real.run = { ...real.run, status };
}

const snapshots = (real: Real): StageSnapshot[] =>
  [...real.stages.entries()].map(([stage, snapshot]) => ({
    stage,
    status: snapshot.status,
    overridden: snapshot.overridden,
    evaluation: evaluateStage(stage, snapshot.results),
  }));

/** The worker's loop: apply nextRunStep until it says wait (bounded: it must come to rest). */
function drive(real: Real): void {
  for (let steps = 0; steps < 50; steps += 1) {
    const step = nextRunStep(real.run, snapshots(real));
    switch (step.kind) {
      case 'wait':
        if (ENDED.has(real.run.status)) {
          for (const stage of real.stages.values()) {
            if (stage.status !== 'pending') continue;
            for (const result of stage.results) if (result.status === 'pending') result.status = 'canceled';
            stage.status = 'canceled';
          }
        }
        return;
      case 'set-run':
        enterRunStatus(real, step.status);
        break;
      case 'start-stage': {
        const stage = real.stages.get(step.stage);
        if (!stage) throw new Error(`start-stage ${step.stage}: the run has no such stage`);
        stage.status = 'running';
        enterRunStatus(real, step.runStatus);
        break;
      }
      case 'finish-stage': {
        const stage = real.stages.get(step.stage);
        if (!stage) throw new Error(`finish-stage ${step.stage}: the run has no such stage`);
        stage.status = step.stageStatus;
        real.warnings ||= step.warning;
        enterRunStatus(real, step.runStatus);
        break;
      }
      case 'plan':
        enterRunStatus(real, 'planned');
        break;
      case 'apply':
        enterRunStatus(real, 'applied');
        break;
    }
  }
  throw new Error(`nextRunStep never said wait (run ${real.run.status})`);
}

/** The API's run action: runActionTarget decides; cancel and discard end every open result and stage. */
function realAction(real: Real, action: RunAction): boolean {
  const target = runActionTarget(action, real.run);
  if (!target) return false;
  enterRunStatus(real, target);
  if (action !== 'apply') {
    for (const stage of real.stages.values()) {
      for (const result of stage.results) if (result.status === 'pending' || result.status === 'running') result.status = 'canceled';
      if (stage.status === 'pending' || stage.status === 'running' || stage.status === 'awaiting_override') stage.status = 'canceled';
    }
  }
  drive(real);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Agreement after every command.

const FINAL_STAGE: ReadonlySet<TaskStageStatus> = new Set(['passed', 'failed', 'errored', 'canceled', 'unreachable']);

interface Observed {
  run: RunStatus;
  warnings: boolean;
  stages: Partial<Record<RunStage, TaskStageStatus>>;
  results: Partial<Record<RunStage, TaskResultStatus[]>>;
}

const observeReal = (real: Real): Observed => ({
  run: real.run.status,
  warnings: real.warnings,
  stages: Object.fromEntries([...real.stages].map(([stage, s]) => [stage, s.status])),
  results: Object.fromEntries([...real.stages].map(([stage, s]) => [stage, s.results.map((result) => result.status)])),
});
const observeModel = (model: Model): Observed => ({
  run: modelRunStatus(model),
  warnings: model.warnings,
  stages: Object.fromEntries(Object.entries(model.stages).map(([stage, s]) => [stage, s.status])),
  results: Object.fromEntries(Object.entries(model.stages).map(([stage, s]) => [stage, s.results.map((result) => result.status)])),
});

/** Every status a run came to rest in, over all sequences: what the commands reached. */
const restedAt = new Set<RunStatus>();

function expectAgreement(model: Model, real: Real, before: Observed | null, what: string): void {
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

type ResultEvent = 'callback-running' | 'callback-passed' | 'callback-failed' | 'deadline' | 'unreachable';
const EVENT_STATUS: Record<ResultEvent, TaskResultStatus> = {
  'callback-running': 'running',
  'callback-passed': 'passed',
  'callback-failed': 'failed',
  // The sweeper: no progress before the deadline → errored.
  deadline: 'errored',
  // Every delivery attempt failed.
  unreachable: 'unreachable',
};

type Command = fc.Command<Model, Real>;

/** Something happens to one result of a stage the run has started (its task has the token). */
class ResultCommand implements Command {
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
class CurrentResultCommand implements Command {
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

class OverrideCommand implements Command {
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

class ActionCommand implements Command {
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

// ---------------------------------------------------------------------------------------------

function initial(setup: Setup): { model: Model; real: Real } {
  const model: Model = {
    setup,
    phase: 0,
    held: false,
    ending: null,
    warnings: false,
    stages: Object.fromEntries(
      Object.entries(setup.tasks).map(([stage, levels]) => [
        stage,
        { status: 'pending', overridden: false, results: levels.map((level) => ({ level, status: 'pending' })) },
      ]),
    ),
  };
  const real: Real = {
    run: { status: 'pending', planOnly: setup.planOnly, autoApply: setup.autoApply, overridesEnabled: setup.overridesEnabled },
    warnings: false,
    stages: new Map(
      (Object.entries(setup.tasks) as [RunStage, Level[]][]).map(([stage, levels]) => [
        stage,
        { status: 'pending', overridden: false, results: levels.map((enforcementLevel) => ({ enforcementLevel, status: 'pending' })) },
      ]),
    ),
    timestamps: new Map([[statusTimestampKey('pending'), 0]]),
    clock: 0,
  };
  settle(model);
  drive(real);
  expectAgreement(model, real, null, 'start');
  return { model, real };
}

const levels = fc.array(fc.constantFrom<Level>('mandatory', 'advisory'), { minLength: 1, maxLength: 3 });
const setups: fc.Arbitrary<Setup> = fc.record({
  planOnly: fc.boolean(),
  autoApply: fc.boolean(),
  overridesEnabled: fc.boolean(),
  tasks: fc.record({ pre_plan: levels, post_plan: levels, pre_apply: levels, post_apply: levels }, { requiredKeys: [] }) as fc.Arbitrary<
    Partial<Record<RunStage, Level[]>>
  >,
});
const events = fc.constantFrom<ResultEvent>('callback-running', 'callback-passed', 'callback-failed', 'deadline', 'unreachable');
const commands = fc.commands(
  [
    // Twice: results of the current stage are what moves a run along.
    fc.tuple(fc.nat(2), events).map(([index, event]) => new CurrentResultCommand(index, event)),
    fc
      .tuple(fc.nat(2), fc.constantFrom<ResultEvent>('callback-passed', 'callback-passed', 'callback-running'))
      .map(([index, event]) => new CurrentResultCommand(index, event)),
    fc
      .tuple(
        fc.constantFrom(...RUN_STAGES),
        fc.integer({ min: 0, max: 2 }),
        fc.constantFrom<ResultEvent>('callback-running', 'callback-passed', 'callback-failed', 'deadline', 'unreachable'),
      )
      .map(([stage, index, event]) => new ResultCommand(stage, index, event)),
    fc.constant(new OverrideCommand()),
    fc.constantFrom(...RUN_ACTIONS).map((action) => new ActionCommand(action)),
  ],
  { maxCommands: 40 },
);

describe('run lifecycle against a model of the HCP rules (fast-check commands)', () => {
  it('the pure rules and the model agree after every callback, deadline, override and action', () => {
    fc.assert(
      fc.property(setups, commands, (setup, cmds) => {
        fc.modelRun(() => initial(setup), cmds);
      }),
      // A fixed seed by default, so the coverage check below cannot fail by luck (a deep state such as
      // pre_apply_awaiting_decision is rare); FC_SEED=<n> explores other sequences.
      { numRuns: 1_500, seed: Number(process.env['FC_SEED'] ?? 20_261_123) },
    );
    // The commands reach every way a run can end or rest, not only the easy ones.
    const missing = [
      'applied',
      'canceled',
      'discarded',
      'errored',
      'planned_and_finished',
      'post_apply_completed',
      'post_plan_completed',
      'pre_plan_awaiting_decision',
      'post_plan_awaiting_decision',
      'pre_apply_awaiting_decision',
      'planned',
      'pre_plan_running',
      'post_plan_running',
      'pre_apply_running',
      'post_apply_running',
    ].filter((status) => !restedAt.has(status as RunStatus));
    expect(missing).toEqual([]);
  });
});
