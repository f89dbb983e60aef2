import { describe, expect, it } from '@jest/globals';
import {
  isRunWaitingOrFinal,
  nextRunStep,
  type ResultSnapshot,
  type RunSnapshot,
  type StageOutcome,
  type StageSnapshot,
} from './lifecycle.ts';
import { RUN_STAGES, RUN_STATUSES, type RunStage, type RunStatus, type TaskStageStatus } from './statuses.ts';
import { referenceEvaluation, WAIT, setRun, finishStage, expectedStep, m, a, type Flags } from './lifecycle.reference.ts';

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
