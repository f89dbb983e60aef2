import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  evaluateStage,
  isRunWaitingOrFinal,
  nextRunStep,
  stageStartedAtCreation,
  type ResultSnapshot,
  type RunSnapshot,
  type RunStep,
  type StageEvaluation,
  type StageOutcome,
  type StageSnapshot,
} from './lifecycle.ts';
import { runActionTarget } from './run-transitions.ts';
import {
  ENFORCEMENT_LEVELS,
  FINAL_RUN_STATUSES,
  RUN_STAGES,
  RUN_STATUSES,
  TASK_RESULT_STATUSES,
  type EnforcementLevel,
  type RunStage,
  type RunStatus,
  type TaskResultStatus,
  type TaskStageStatus,
} from './statuses.ts';

// ---------------------------------------------------------------------------------------------
// Reference rules, written from docs/design.md ("How a run moves" and the rules under it)
// ---------------------------------------------------------------------------------------------

/** Results still waiting for their task. */
const OPEN_RESULT_STATUSES: readonly TaskResultStatus[] = ['pending', 'running'];

/** Blocking outcomes of a stage, strongest first: a canceled run trumps everything, then failed, errored, unreachable. */
const BLOCKING_PRECEDENCE: readonly StageOutcome[] = ['canceled', 'failed', 'errored', 'unreachable'];

/**
 * Stage status: nothing is decided while a result is open; then the mandatory results decide
 * (worst outcome by precedence, else passed) and every other result that did not pass leaves a warning.
 * In post_apply no result decides: its tasks act as advisory.
 */
function referenceEvaluation(stage: RunStage, results: readonly ResultSnapshot[]): StageEvaluation | null {
  if (results.some((result) => OPEN_RESULT_STATUSES.includes(result.status))) return null;
  const decides = (result: ResultSnapshot): boolean => stage !== 'post_apply' && result.enforcementLevel === 'mandatory';
  const decisive = new Set<TaskResultStatus>(results.filter(decides).map((result) => result.status));
  const status = BLOCKING_PRECEDENCE.find((outcome) => decisive.has(outcome)) ?? 'passed';
  const warning = results.filter((result) => !decides(result)).some((result) => result.status !== 'passed');
  return { status, warning };
}

const runningStatus = (stage: RunStage) => `${stage}_running` as const;
const completedStatus = (stage: RunStage) => `${stage}_completed` as const;
const STAGE_STATUSES_DONE: readonly TaskStageStatus[] = ['passed', 'failed', 'errored', 'unreachable', 'canceled'];
const WAIT: RunStep = { kind: 'wait' };
const setRun = (status: RunStatus): RunStep => ({ kind: 'set-run', status });
const startStage = (stage: RunStage): RunStep => ({ kind: 'start-stage', stage, runStatus: runningStatus(stage) });
const finishStage = (stage: RunStage, stageStatus: TaskStageStatus, runStatus: RunStatus, warning: boolean): RunStep => ({
  kind: 'finish-stage',
  stage,
  stageStatus,
  runStatus,
  warning,
});

/** The run status that holds a blocking stage for a person; post_apply has none (it never blocks). */
function awaitingStatus(stage: RunStage): RunStatus | null {
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

/** Hand-written expectation of the next step, from the run lifecycle (docs/design.md, "How a run moves"). */
function expectedStep(run: RunSnapshot, stages: readonly StageSnapshot[]): RunStep {
  const find = (stage: RunStage): StageSnapshot | undefined => stages.find((candidate) => candidate.stage === stage);

  // Past a stage (it passed, or the run has no tasks there): the lifecycle's next status.
  const pastStage = (stage: RunStage): RunStep => {
    if (stage === 'pre_plan') return setRun('planning');
    if (stage === 'pre_apply') return setRun('applying');
    if (stage === 'post_apply') return WAIT; // applied (or post_apply_completed) is where a run ends
    // post_plan: speculative runs finish, auto-apply confirms, the others wait for `apply` or `discard`.
    if (run.planOnly) return setRun('planned_and_finished');
    return run.autoApply ? setRun('confirmed') : WAIT;
  };

  // Arriving at a stage: start it when it has tasks still to run; stages without tasks are skipped.
  const arriveAt = (stage: RunStage): RunStep => {
    const snapshot = find(stage);
    return snapshot && !STAGE_STATUSES_DONE.includes(snapshot.status) ? startStage(stage) : pastStage(stage);
  };

  // The run sits in a stage: decide it from its results.
  const decide = (stage: RunStage): RunStep => {
    const snapshot = find(stage);
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
      case 'running': {
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
    }
  };

  // The run waits for a person while its stage is held; once the stage moved on (override), decide it again.
  const awaitDecision = (stage: RunStage): RunStep => (find(stage)?.status === 'awaiting_override' ? WAIT : decide(stage));

  switch (run.status) {
    case 'pending':
      return arriveAt('pre_plan');
    case 'pre_plan_running':
      return decide('pre_plan');
    case 'pre_plan_awaiting_decision':
      return awaitDecision('pre_plan');
    case 'pre_plan_completed':
      return pastStage('pre_plan');
    case 'planning':
      return { kind: 'plan' };
    case 'planned':
      return arriveAt('post_plan');
    case 'post_plan_running':
      return decide('post_plan');
    case 'post_plan_awaiting_decision':
      return awaitDecision('post_plan');
    case 'post_plan_completed':
      return pastStage('post_plan');
    case 'confirmed':
      // A plan-only run can never be confirmed; if it is, it errors instead of applying.
      return run.planOnly ? setRun('errored') : arriveAt('pre_apply');
    case 'pre_apply_running':
      return decide('pre_apply');
    case 'pre_apply_awaiting_decision':
      return awaitDecision('pre_apply');
    case 'pre_apply_completed':
      return pastStage('pre_apply');
    case 'applying':
      return { kind: 'apply' };
    case 'applied':
      return arriveAt('post_apply');
    case 'post_apply_running':
      return decide('post_apply');
    case 'post_apply_completed':
    case 'planned_and_finished':
    case 'discarded':
    case 'errored':
    case 'canceled':
      return WAIT;
  }
}

// ---------------------------------------------------------------------------------------------
// evaluateStage
// ---------------------------------------------------------------------------------------------

const RESULT_KINDS: ResultSnapshot[] = TASK_RESULT_STATUSES.flatMap((status) =>
  ENFORCEMENT_LEVELS.map((enforcementLevel) => ({ status, enforcementLevel })),
);

/** Every multiset of `items` with at most `maxSize` elements (non-decreasing index sequences). */
function multisets<T>(items: readonly T[], maxSize: number): T[][] {
  const all: T[][] = [[]];
  const grow = (prefix: T[], from: number): void => {
    if (prefix.length === maxSize) return;
    for (let index = from; index < items.length; index += 1) {
      const next = [...prefix, items[index] as T];
      all.push(next);
      grow(next, index);
    }
  };
  grow([], 0);
  return all;
}

const RESULT_MULTISETS = multisets(RESULT_KINDS, 3);
const describeResults = (results: readonly ResultSnapshot[]): string =>
  results.length === 0 ? 'no results' : results.map((result) => `${result.enforcementLevel} ${result.status}`).join(' + ');

const m = (status: TaskResultStatus): ResultSnapshot => ({ status, enforcementLevel: 'mandatory' });
const a = (status: TaskResultStatus): ResultSnapshot => ({ status, enforcementLevel: 'advisory' });
const passed = (warning = false): StageEvaluation => ({ status: 'passed', warning });
const blocked = (status: StageOutcome, warning = false): StageEvaluation => ({ status, warning });

interface NamedCase {
  name: string;
  stage: RunStage;
  results: ResultSnapshot[];
  expected: StageEvaluation | null;
}

const NAMED_CASES: NamedCase[] = [
  { name: 'no results → passed', stage: 'pre_plan', results: [], expected: passed() },
  { name: 'post_apply with no results → passed', stage: 'post_apply', results: [], expected: passed() },
  { name: 'mandatory passed → passed', stage: 'pre_plan', results: [m('passed')], expected: passed() },
  { name: 'advisory passed → passed', stage: 'post_plan', results: [a('passed')], expected: passed() },
  { name: 'three mandatory passed → passed', stage: 'pre_apply', results: [m('passed'), m('passed'), m('passed')], expected: passed() },
  {
    name: 'advisory failed + mandatory passed → passed with warning',
    stage: 'pre_plan',
    results: [a('failed'), m('passed')],
    expected: passed(true),
  },
  { name: 'advisory failed alone → passed with warning', stage: 'post_plan', results: [a('failed')], expected: passed(true) },
  { name: 'advisory errored → passed with warning', stage: 'pre_apply', results: [a('errored')], expected: passed(true) },
  { name: 'advisory unreachable → passed with warning', stage: 'pre_plan', results: [a('unreachable')], expected: passed(true) },
  { name: 'advisory canceled → passed with warning', stage: 'pre_plan', results: [a('canceled')], expected: passed(true) },
  { name: 'mandatory failed → failed', stage: 'pre_plan', results: [m('failed')], expected: blocked('failed') },
  { name: 'mandatory errored → errored', stage: 'post_plan', results: [m('errored')], expected: blocked('errored') },
  { name: 'mandatory unreachable → unreachable', stage: 'pre_apply', results: [m('unreachable')], expected: blocked('unreachable') },
  { name: 'mandatory canceled → canceled', stage: 'pre_plan', results: [m('canceled')], expected: blocked('canceled') },
  {
    name: 'mandatory unreachable + mandatory errored → errored',
    stage: 'pre_plan',
    results: [m('unreachable'), m('errored')],
    expected: blocked('errored'),
  },
  {
    name: 'mandatory errored + mandatory failed → failed',
    stage: 'post_plan',
    results: [m('errored'), m('failed')],
    expected: blocked('failed'),
  },
  {
    name: 'mandatory failed + mandatory canceled → canceled',
    stage: 'pre_apply',
    results: [m('failed'), m('canceled')],
    expected: blocked('canceled'),
  },
  {
    name: 'mandatory passed + mandatory unreachable → unreachable',
    stage: 'pre_plan',
    results: [m('passed'), m('unreachable')],
    expected: blocked('unreachable'),
  },
  {
    name: 'mandatory failed + advisory failed → failed with warning',
    stage: 'pre_plan',
    results: [m('failed'), a('failed')],
    expected: blocked('failed', true),
  },
  {
    name: 'mandatory errored + advisory passed → errored without warning',
    stage: 'post_plan',
    results: [m('errored'), a('passed')],
    expected: blocked('errored'),
  },
  {
    name: 'mandatory failed + advisory errored + mandatory passed → failed with warning',
    stage: 'pre_apply',
    results: [m('failed'), a('errored'), m('passed')],
    expected: blocked('failed', true),
  },
  { name: 'post_apply mandatory failed → passed with warning', stage: 'post_apply', results: [m('failed')], expected: passed(true) },
  {
    name: 'post_apply mandatory errored + mandatory canceled → passed with warning',
    stage: 'post_apply',
    results: [m('errored'), m('canceled')],
    expected: passed(true),
  },
  {
    name: 'post_apply mandatory and advisory passed → passed without warning',
    stage: 'post_apply',
    results: [m('passed'), a('passed')],
    expected: passed(),
  },
  { name: 'any open result → null (mandatory pending)', stage: 'pre_plan', results: [m('pending')], expected: null },
  { name: 'any open result → null (advisory pending)', stage: 'post_plan', results: [a('pending'), m('failed')], expected: null },
  {
    name: 'any open result → null (mandatory running beside a final failure)',
    stage: 'pre_apply',
    results: [m('running'), m('failed')],
    expected: null,
  },
  {
    name: 'any open result → null (advisory running beside mandatory passed)',
    stage: 'pre_plan',
    results: [a('running'), m('passed')],
    expected: null,
  },
  { name: 'any open result → null (post_apply)', stage: 'post_apply', results: [a('pending'), m('passed')], expected: null },
];

describe('evaluateStage', () => {
  it('enumerates every multiset of up to three results (1 + 14 + 105 + 560)', () => {
    expect(RESULT_KINDS).toHaveLength(14);
    expect(RESULT_MULTISETS).toHaveLength(680);
    expect(new Set(RESULT_MULTISETS.map(describeResults)).size).toBe(680);
  });

  const exhaustive = RUN_STAGES.flatMap((stage) =>
    RESULT_MULTISETS.map((results) => ({ label: `${stage}: ${describeResults(results)}`, stage, results })),
  );
  it.each(exhaustive)('$label', ({ stage, results }) => {
    const expected = referenceEvaluation(stage, results);
    expect(evaluateStage(stage, results)).toEqual(expected);
    // The order in which results are listed does not matter.
    expect(evaluateStage(stage, [...results].reverse())).toEqual(expected);
  });

  it.each(NAMED_CASES)('$name', ({ stage, results, expected }) => {
    expect(evaluateStage(stage, results)).toEqual(expected);
    expect(referenceEvaluation(stage, results)).toEqual(expected);
  });

  it('never blocks post_apply and never warns when everything passed', () => {
    for (const results of RESULT_MULTISETS) {
      const postApply = evaluateStage('post_apply', results);
      if (postApply) expect(postApply.status).toBe('passed');
      for (const stage of RUN_STAGES) {
        const evaluation = evaluateStage(stage, results);
        if (results.every((result) => result.status === 'passed')) expect(evaluation).toEqual(passed());
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// nextRunStep: every run status × flags × stage configuration
// ---------------------------------------------------------------------------------------------

function stageSnapshot(stage: RunStage, status: TaskStageStatus, results: readonly ResultSnapshot[], overridden = false): StageSnapshot {
  return { stage, status, overridden, evaluation: referenceEvaluation(stage, results) };
}

interface StageConfig {
  name: string;
  stages: StageSnapshot[];
}

const OUTCOMES: readonly StageOutcome[] = ['passed', 'failed', 'errored', 'unreachable', 'canceled'];

function configsFor(stage: RunStage): StageConfig[] {
  const configs: StageConfig[] = [
    { name: `${stage} pending`, stages: [stageSnapshot(stage, 'pending', [m('pending'), a('pending')])] },
    { name: `${stage} running, results open`, stages: [stageSnapshot(stage, 'running', [m('running'), a('passed')])] },
  ];
  for (const outcome of OUTCOMES) {
    configs.push(
      { name: `${stage} running, mandatory ${outcome}`, stages: [stageSnapshot(stage, 'running', [m(outcome)])] },
      {
        name: `${stage} running, mandatory ${outcome} + advisory failed`,
        stages: [stageSnapshot(stage, 'running', [m(outcome), a('failed')])],
      },
    );
  }
  // Only stages that can block can be held for (and get) an override.
  if (stage !== 'post_apply') {
    configs.push(
      { name: `${stage} awaiting_override`, stages: [stageSnapshot(stage, 'awaiting_override', [m('failed')])] },
      { name: `${stage} overridden (running)`, stages: [stageSnapshot(stage, 'running', [m('failed')], true)] },
    );
  }
  for (const outcome of OUTCOMES) {
    configs.push({ name: `${stage} ${outcome} (final)`, stages: [stageSnapshot(stage, outcome, [m(outcome)])] });
  }
  return configs;
}

const STAGE_CONFIGS: StageConfig[] = [
  { name: 'no stages', stages: [] },
  ...RUN_STAGES.flatMap(configsFor),
  { name: 'all four stages pending', stages: RUN_STAGES.map((stage) => stageSnapshot(stage, 'pending', [m('pending')])) },
  {
    name: 'all four stages pending, listed in reverse',
    stages: [...RUN_STAGES].reverse().map((stage) => stageSnapshot(stage, 'pending', [a('pending')])),
  },
];

interface Flags {
  planOnly: boolean;
  autoApply: boolean;
  overridesEnabled: boolean;
}
const BOOLEANS = [false, true] as const;
const FLAGS: Flags[] = BOOLEANS.flatMap((planOnly) =>
  BOOLEANS.flatMap((autoApply) => BOOLEANS.map((overridesEnabled) => ({ planOnly, autoApply, overridesEnabled }))),
);

const STEP_CASES = RUN_STATUSES.flatMap((status) =>
  STAGE_CONFIGS.map((config) => ({ label: `${status} | ${config.name}`, status, stages: config.stages })),
);

describe('nextRunStep', () => {
  it('covers 21 run statuses × 77 stage configurations × 8 flag combinations', () => {
    expect(RUN_STATUSES).toHaveLength(21);
    expect(STAGE_CONFIGS).toHaveLength(77);
    expect(FLAGS).toHaveLength(8);
    expect(STEP_CASES).toHaveLength(21 * 77);
  });

  it.each(STEP_CASES)('$label', ({ status, stages }) => {
    const actual = FLAGS.map((flags) => ({ ...flags, step: nextRunStep({ status, ...flags }, stages) }));
    const expected = FLAGS.map((flags) => ({ ...flags, step: expectedStep({ status, ...flags }, stages) }));
    expect(actual).toEqual(expected);
    const waiting = FLAGS.map((flags) => ({ ...flags, waiting: isRunWaitingOrFinal({ status, ...flags }, stages) }));
    expect(waiting).toEqual(expected.map(({ step, ...flags }) => ({ ...flags, waiting: step.kind === 'wait' })));
  });

  it('spot checks of the expectation itself', () => {
    const run = (status: RunStatus, flags: Partial<Flags> = {}): RunSnapshot => ({
      status,
      planOnly: false,
      autoApply: false,
      overridesEnabled: false,
      ...flags,
    });
    const failedPrePlan = [stageSnapshot('pre_plan', 'running', [m('failed')])];
    expect(nextRunStep(run('pending'), [])).toEqual(setRun('planning'));
    expect(nextRunStep(run('planned', { autoApply: true }), [])).toEqual(setRun('confirmed'));
    expect(nextRunStep(run('planned'), [])).toEqual(WAIT);
    expect(nextRunStep(run('confirmed', { planOnly: true }), [])).toEqual(setRun('errored'));
    expect(nextRunStep(run('pre_plan_running'), failedPrePlan)).toEqual(finishStage('pre_plan', 'failed', 'errored', false));
    expect(nextRunStep(run('pre_plan_running', { overridesEnabled: true }), failedPrePlan)).toEqual(
      finishStage('pre_plan', 'awaiting_override', 'pre_plan_awaiting_decision', false),
    );
    expect(nextRunStep(run('pre_plan_running', { overridesEnabled: true, planOnly: true }), failedPrePlan)).toEqual(
      finishStage('pre_plan', 'failed', 'errored', false),
    );
    expect(nextRunStep(run('post_apply_running'), [stageSnapshot('post_apply', 'running', [m('failed')])])).toEqual(
      finishStage('post_apply', 'passed', 'post_apply_completed', true),
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Whole runs on an in-memory model
// ---------------------------------------------------------------------------------------------

type Outcome = Exclude<TaskResultStatus, 'pending' | 'running'>;

interface ModelResult {
  status: TaskResultStatus;
  enforcementLevel: EnforcementLevel;
  /** What the task will report once it runs. */
  outcome: Outcome;
}

interface ModelStage {
  stage: RunStage;
  status: TaskStageStatus;
  overridden: boolean;
  results: ModelResult[];
}

interface Person {
  /** On a held stage: override it, discard the run, or leave it waiting. */
  onHeld?: 'override' | 'discard';
  /** On a planned run waiting for confirmation: apply, discard, or leave it. */
  onPlanned?: 'apply' | 'discard';
}

interface RunSetup extends Flags {
  stages: { stage: RunStage; results: { enforcementLevel: EnforcementLevel; outcome: Outcome }[] }[];
  person?: Person;
  /** Report one open result per turn instead of all of them at once. */
  oneResultPerTurn?: boolean;
}

interface Simulation {
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

const MAX_STEPS = 32;

function simulate(setup: RunSetup): Simulation {
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

type StageSetup = RunSetup['stages'][number];
const stageWith = (stage: RunStage, ...results: [EnforcementLevel, Outcome][]): StageSetup => ({
  stage,
  results: results.map(([enforcementLevel, outcome]) => ({ enforcementLevel, outcome })),
});
const allPassing = (): StageSetup[] => RUN_STAGES.map((stage) => stageWith(stage, ['mandatory', 'passed'], ['advisory', 'passed']));
const manual: Flags = { planOnly: false, autoApply: false, overridesEnabled: false };
const auto: Flags = { ...manual, autoApply: true };

const FULL_LIFECYCLE: RunStatus[] = [
  'pending',
  'pre_plan_running',
  'pre_plan_completed',
  'planning',
  'planned',
  'post_plan_running',
  'post_plan_completed',
  'confirmed',
  'pre_apply_running',
  'pre_apply_completed',
  'applying',
  'applied',
  'post_apply_running',
  'post_apply_completed',
];

describe('whole runs', () => {
  it('all four stages pass with auto-apply: post_apply_completed, in lifecycle order', () => {
    const sim = simulate({ ...auto, stages: allPassing() });
    expect(sim.history).toEqual(FULL_LIFECYCLE);
    expect(sim.waitedAt).toEqual(['post_apply_completed']);
    expect([...sim.stages.values()]).toEqual(['passed', 'passed', 'passed', 'passed']);
    expect({ warning: sim.warning, plans: sim.plans, applies: sim.applies }).toEqual({ warning: false, plans: 1, applies: 1 });
  });

  it('all four stages pass, reported one result at a time: same lifecycle', () => {
    const sim = simulate({ ...auto, stages: allPassing(), oneResultPerTurn: true });
    expect(sim.history).toEqual(FULL_LIFECYCLE);
  });

  it('without auto-apply the run waits at post_plan_completed until a person applies', () => {
    const waiting = simulate({ ...manual, stages: allPassing() });
    expect(waiting.history).toEqual(FULL_LIFECYCLE.slice(0, FULL_LIFECYCLE.indexOf('post_plan_completed') + 1));
    expect(waiting.applies).toBe(0);
    const applied = simulate({ ...manual, stages: allPassing(), person: { onPlanned: 'apply' } });
    expect(applied.history).toEqual(FULL_LIFECYCLE);
    const discarded = simulate({ ...manual, stages: allPassing(), person: { onPlanned: 'discard' } });
    expect(discarded.history.at(-1)).toBe('discarded');
    expect(discarded.applies).toBe(0);
  });

  it('a mandatory pre_apply failure errors the run without applying', () => {
    const stages = allPassing().map((stage) => (stage.stage === 'pre_apply' ? stageWith('pre_apply', ['mandatory', 'failed']) : stage));
    const sim = simulate({ ...auto, stages });
    expect(sim.history).toEqual([...FULL_LIFECYCLE.slice(0, FULL_LIFECYCLE.indexOf('pre_apply_running') + 1), 'errored']);
    expect(sim.applies).toBe(0);
    expect(Object.fromEntries(sim.stages)).toEqual({ pre_plan: 'passed', post_plan: 'passed', pre_apply: 'failed', post_apply: 'pending' });
  });

  it('each blocking outcome of a mandatory pre_plan task errors the run before planning', () => {
    for (const outcome of ['failed', 'errored', 'unreachable', 'canceled'] as const) {
      const sim = simulate({ ...auto, stages: [stageWith('pre_plan', ['mandatory', outcome], ['mandatory', 'passed'])] });
      expect({ outcome, history: sim.history, stage: sim.stages.get('pre_plan'), plans: sim.plans }).toEqual({
        outcome,
        history: ['pending', 'pre_plan_running', 'errored'],
        stage: outcome,
        plans: 0,
      });
    }
  });

  it('plan-only: planned_and_finished, apply stages never run', () => {
    const sim = simulate({ ...auto, planOnly: true, stages: allPassing(), person: { onPlanned: 'apply' } });
    expect(sim.history).toEqual([
      'pending',
      'pre_plan_running',
      'pre_plan_completed',
      'planning',
      'planned',
      'post_plan_running',
      'post_plan_completed',
      'planned_and_finished',
    ]);
    expect(Object.fromEntries(sim.stages)).toEqual({
      pre_plan: 'passed',
      post_plan: 'passed',
      pre_apply: 'pending',
      post_apply: 'pending',
    });
    expect(sim.applies).toBe(0);
  });

  it('plan-only runs are never held, even with overrides enabled', () => {
    const sim = simulate({
      ...manual,
      planOnly: true,
      overridesEnabled: true,
      stages: [stageWith('post_plan', ['mandatory', 'failed'])],
      person: { onHeld: 'override' },
    });
    expect(sim.history).toEqual(['pending', 'planning', 'planned', 'post_plan_running', 'errored']);
    expect(sim.stages.get('post_plan')).toBe('failed');
  });

  it('override path: a held pre_plan stage is overridden, passes and the run goes on (with a warning)', () => {
    const sim = simulate({
      ...auto,
      overridesEnabled: true,
      stages: [stageWith('pre_plan', ['mandatory', 'failed']), stageWith('pre_apply', ['mandatory', 'passed'])],
      person: { onHeld: 'override' },
    });
    expect(sim.history).toEqual([
      'pending',
      'pre_plan_running',
      'pre_plan_awaiting_decision',
      'pre_plan_completed',
      'planning',
      'planned',
      'confirmed',
      'pre_apply_running',
      'pre_apply_completed',
      'applying',
      'applied',
    ]);
    expect(sim.waitedAt).toContain('pre_plan_awaiting_decision');
    expect(Object.fromEntries(sim.stages)).toEqual({ pre_plan: 'passed', pre_apply: 'passed' });
    expect(sim.warning).toBe(true);
  });

  it('override path: a held post_plan stage, overridden, then waits for confirmation', () => {
    const sim = simulate({
      ...manual,
      overridesEnabled: true,
      stages: [stageWith('post_plan', ['mandatory', 'errored'], ['advisory', 'passed'])],
      person: { onHeld: 'override', onPlanned: 'apply' },
    });
    expect(sim.history).toEqual([
      'pending',
      'planning',
      'planned',
      'post_plan_running',
      'post_plan_awaiting_decision',
      'post_plan_completed',
      'confirmed',
      'applying',
      'applied',
    ]);
  });

  it('override path: nobody decides → the run stays awaiting; discarding it ends it discarded', () => {
    const stages = [stageWith('pre_apply', ['mandatory', 'unreachable'])];
    const held = simulate({ ...auto, overridesEnabled: true, stages });
    expect(held.history).toEqual(['pending', 'planning', 'planned', 'confirmed', 'pre_apply_running', 'pre_apply_awaiting_decision']);
    expect(held.stages.get('pre_apply')).toBe('awaiting_override');
    const discarded = simulate({ ...auto, overridesEnabled: true, stages, person: { onHeld: 'discard' } });
    expect(discarded.history).toEqual([...held.history, 'discarded']);
    expect(discarded.applies).toBe(0);
  });

  it('a canceled mandatory result is never held for an override', () => {
    const sim = simulate({
      ...auto,
      overridesEnabled: true,
      stages: [stageWith('pre_plan', ['mandatory', 'canceled'])],
      person: { onHeld: 'override' },
    });
    expect(sim.history).toEqual(['pending', 'pre_plan_running', 'errored']);
    expect(sim.stages.get('pre_plan')).toBe('canceled');
  });

  it('advisory failures only warn', () => {
    const stages = allPassing().map((stage) =>
      stage.stage === 'post_plan' ? stageWith('post_plan', ['advisory', 'failed'], ['mandatory', 'passed']) : stage,
    );
    const sim = simulate({ ...auto, stages });
    expect(sim.history).toEqual(FULL_LIFECYCLE);
    expect(sim.warning).toBe(true);
  });

  it('post_apply never blocks: a mandatory post_apply failure completes the run with a warning', () => {
    const sim = simulate({ ...auto, overridesEnabled: true, stages: [stageWith('post_apply', ['mandatory', 'failed'])] });
    expect(sim.history).toEqual([
      'pending',
      'planning',
      'planned',
      'confirmed',
      'applying',
      'applied',
      'post_apply_running',
      'post_apply_completed',
    ]);
    expect(sim.stages.get('post_apply')).toBe('passed');
    expect(sim.warning).toBe(true);
  });

  it('no tasks at all: the stages are skipped', () => {
    expect(simulate({ ...auto, stages: [] }).history).toEqual(['pending', 'planning', 'planned', 'confirmed', 'applying', 'applied']);
    const waiting = simulate({ ...manual, stages: [] });
    expect(waiting.history).toEqual(['pending', 'planning', 'planned']);
    expect(waiting.waitedAt).toEqual(['planned']);
    expect(simulate({ ...manual, stages: [], person: { onPlanned: 'apply' } }).history).toEqual([
      'pending',
      'planning',
      'planned',
      'confirmed',
      'applying',
      'applied',
    ]);
    expect(simulate({ ...auto, planOnly: true, stages: [] }).history).toEqual(['pending', 'planning', 'planned', 'planned_and_finished']);
  });
});

// ---------------------------------------------------------------------------------------------
// Property: random outcomes never loop, never leave RUN_STATUSES, always settle
// ---------------------------------------------------------------------------------------------

/** Position in the lifecycle; a held stage sits where its stage runs, every final status at the end. */
const LIFECYCLE_RANK: Record<RunStatus, number> = {
  pending: 0,
  pre_plan_running: 1,
  pre_plan_awaiting_decision: 1,
  pre_plan_completed: 2,
  planning: 3,
  planned: 4,
  post_plan_running: 5,
  post_plan_awaiting_decision: 5,
  post_plan_completed: 6,
  confirmed: 7,
  pre_apply_running: 8,
  pre_apply_awaiting_decision: 8,
  pre_apply_completed: 9,
  applying: 10,
  applied: 11,
  post_apply_running: 12,
  post_apply_completed: 13,
  planned_and_finished: 14,
  discarded: 14,
  errored: 14,
  canceled: 14,
};

/** Statuses in which a run waits for a person (confirmation or an override decision). */
const WAITING_FOR_A_PERSON: ReadonlySet<RunStatus> = new Set([
  'planned',
  'post_plan_completed',
  'pre_plan_awaiting_decision',
  'post_plan_awaiting_decision',
  'pre_apply_awaiting_decision',
]);

const outcomeArb = fc.constantFrom<Outcome>('passed', 'failed', 'errored', 'unreachable', 'canceled');
const resultArb = fc.record({ enforcementLevel: fc.constantFrom<EnforcementLevel>(...ENFORCEMENT_LEVELS), outcome: outcomeArb });
const setupArb: fc.Arbitrary<RunSetup> = fc.record({
  planOnly: fc.boolean(),
  autoApply: fc.boolean(),
  overridesEnabled: fc.boolean(),
  stages: fc
    .subarray([...RUN_STAGES])
    .chain((names) =>
      fc.tuple(...names.map((stage) => fc.array(resultArb, { minLength: 1, maxLength: 4 }).map((results) => ({ stage, results })))),
    ),
  person: fc.record(
    {
      onHeld: fc.constantFrom<'override' | 'discard'>('override', 'discard'),
      onPlanned: fc.constantFrom<'apply' | 'discard'>('apply', 'discard'),
    },
    { requiredKeys: [] },
  ),
  oneResultPerTurn: fc.boolean(),
});

describe('model-based property', () => {
  it('random result outcomes: at most 32 steps, only RUN_STATUSES, in lifecycle order, ending final or waiting', () => {
    fc.assert(
      fc.property(setupArb, (setup) => {
        const sim = simulate(setup);
        expect(sim.steps).toBeLessThanOrEqual(MAX_STEPS);
        expect(sim.longestAdvance).toBeLessThanOrEqual(MAX_STEPS);
        for (const status of sim.history) expect(RUN_STATUSES).toContain(status);
        for (let index = 1; index < sim.history.length; index += 1) {
          const [before, after] = [sim.history[index - 1] as RunStatus, sim.history[index] as RunStatus];
          expect(after).not.toBe(before);
          expect(LIFECYCLE_RANK[after]).toBeGreaterThanOrEqual(LIFECYCLE_RANK[before]);
        }
        const end = sim.final.status;
        expect(FINAL_RUN_STATUSES.has(end) || WAITING_FOR_A_PERSON.has(end)).toBe(true);
        expect(sim.plans).toBeLessThanOrEqual(1);
        expect(sim.applies).toBeLessThanOrEqual(1);
        if (setup.planOnly) {
          expect(sim.applies).toBe(0);
          expect(sim.stages.get('pre_apply') ?? 'pending').toBe('pending');
          expect(sim.stages.get('post_apply') ?? 'pending').toBe('pending');
        }
        // A run only applies when every pre-apply stage passed (possibly by override).
        if (sim.applies > 0) {
          for (const stage of ['pre_plan', 'post_plan', 'pre_apply'] as const) expect(sim.stages.get(stage) ?? 'passed').toBe('passed');
        }
        // Without overrides no stage is ever held.
        if (!setup.overridesEnabled) expect([...sim.stages.values()]).not.toContain('awaiting_override');
        // A finished run leaves no stage mid-way.
        if (end === 'post_apply_completed') expect([...sim.stages.values()].every((status) => status === 'passed')).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('stageStartedAtCreation', () => {
  // Every set of run stages with tasks (16), with every flag combination (8): a run starts its pre_plan
  // stage as it is created exactly when it has one; otherwise its first step is the worker's (planning).
  const stageSets = Array.from({ length: 1 << RUN_STAGES.length }, (_, mask) => RUN_STAGES.filter((_, bit) => (mask & (1 << bit)) !== 0));
  const flags = [false, true].flatMap((planOnly) =>
    [false, true].flatMap((autoApply) => [false, true].map((overridesEnabled) => ({ planOnly, autoApply, overridesEnabled }))),
  );
  const table = stageSets.flatMap((stages) =>
    flags.map((run) => ({ label: `[${stages.join(', ')}] ${JSON.stringify(run)}`, stages, run })),
  );

  it('covers 16 stage sets × 8 flag combinations', () => {
    expect(table).toHaveLength(128);
  });

  it.each(table)('$label', ({ stages, run }) => {
    const expected = stages.includes('pre_plan') ? { stage: 'pre_plan', runStatus: 'pre_plan_running' } : undefined;
    expect(stageStartedAtCreation(run, stages)).toEqual(expected);
  });
});
