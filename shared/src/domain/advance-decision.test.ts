import { describe, expect, it } from '@jest/globals';
import { decideAdvance, ENDED_RUNS, type AdvanceResult, type AdvanceStage } from './advance-decision.ts';
import { reportTimeoutMessage } from './executions.ts';
import type { RunSnapshot } from './lifecycle.ts';
import { RUN_STATUSES, type EnforcementLevel, type RunStage, type TaskResultStatus, type TaskStageStatus } from './statuses.ts';

const TIMEOUTS = { planning: 60, applying: 60 };

const run = (status: RunSnapshot['status'], overrides: Partial<RunSnapshot> = {}): RunSnapshot => ({
  status,
  planOnly: false,
  autoApply: false,
  overridesEnabled: false,
  ...overrides,
});
const stage = (id: string, name: RunStage, status: TaskStageStatus): AdvanceStage => ({ id, stage: name, status, statusTimestamps: {} });
const result = (id: string, stageId: string, status: TaskResultStatus, level: EnforcementLevel = 'mandatory'): AdvanceResult => ({
  id,
  stageId,
  status,
  enforcementLevel: level,
});

interface Case {
  name: string;
  run: RunSnapshot;
  stages: AdvanceStage[];
  results: AdvanceResult[];
  expected: Partial<ReturnType<typeof decideAdvance>>;
}

// prettier-ignore
const CASES: Case[] = [
  {
    name: 'a pending run starts its pre_plan stage and its pending results, then waits for them',
    run: run('pending'),
    stages: [stage('s1', 'pre_plan', 'pending')],
    results: [result('r1', 's1', 'pending'), result('r2', 's1', 'pending')],
    expected: { runStatus: 'pre_plan_running', runTransitions: ['pre-plan-running-at'], startedResultIds: ['r1', 'r2'],
      stageWrites: new Map([['s1', { status: 'running', keys: ['running-at'] }]]), executions: [], unstartedStageIds: [] },
  },
  {
    name: 'a passed pre_plan stage of a plan-only run: completed, planned by the executor, finished',
    run: run('pre_plan_running', { planOnly: true }),
    stages: [stage('s1', 'pre_plan', 'running')],
    results: [result('r1', 's1', 'passed')],
    expected: { runStatus: 'planned_and_finished', runTransitions: ['pre-plan-completed-at', 'planning-at', 'planned-at', 'planned-and-finished-at'],
      executions: ['plan'], stageWrites: new Map([['s1', { status: 'passed', keys: ['passed-at'] }]]), warning: false, unstartedStageIds: [] },
  },
  {
    name: 'an advisory failure passes the stage with a warning',
    run: run('pre_plan_running', { planOnly: true }),
    stages: [stage('s1', 'pre_plan', 'running')],
    results: [result('r1', 's1', 'failed', 'advisory')],
    expected: { runStatus: 'planned_and_finished', warning: true, stageWrites: new Map([['s1', { status: 'passed', keys: ['passed-at'] }]]) },
  },
  {
    name: 'a mandatory failure without overrides errors the run and ends the stages it never started',
    run: run('post_plan_running'),
    stages: [stage('s1', 'post_plan', 'running'), stage('s2', 'pre_apply', 'pending')],
    results: [result('r1', 's1', 'failed'), result('r2', 's2', 'pending')],
    expected: { runStatus: 'errored', runTransitions: ['errored-at'], startedResultIds: [], unstartedStageIds: ['s2'],
      stageWrites: new Map([['s1', { status: 'failed', keys: ['failed-at'] }]]) },
  },
  {
    name: 'a mandatory failure with overrides holds the stage and the run for a decision',
    run: run('post_plan_running', { overridesEnabled: true }),
    stages: [stage('s1', 'post_plan', 'running'), stage('s2', 'pre_apply', 'pending')],
    results: [result('r1', 's1', 'failed'), result('r2', 's2', 'pending')],
    expected: { runStatus: 'post_plan_awaiting_decision', runTransitions: ['post-plan-awaiting-decision-at'], unstartedStageIds: [],
      stageWrites: new Map([['s1', { status: 'awaiting_override', keys: ['awaiting-override-at'] }]]) },
  },
  {
    name: "a local run whose plan report is overdue errors, saying why",
    run: run('planning', { executionMode: 'local', reportOverdue: true }),
    stages: [stage('s1', 'post_plan', 'pending')],
    results: [],
    expected: { runStatus: 'errored', runTransitions: ['errored-at'], executionError: reportTimeoutMessage('planning', TIMEOUTS),
      executions: [], unstartedStageIds: ['s1'] },
  },
  {
    name: 'a local run waiting for its plan report in time does nothing',
    run: run('planning', { executionMode: 'local', reportOverdue: false }),
    stages: [],
    results: [],
    expected: { runStatus: 'planning', runTransitions: [], executions: [], executionError: undefined, stageWrites: new Map() },
  },
  {
    name: 'an auto-apply run without stages goes all the way, planning and applying',
    run: run('pending', { autoApply: true }),
    stages: [],
    results: [],
    expected: { runStatus: 'applied', executions: ['plan', 'apply'],
      runTransitions: ['planning-at', 'planned-at', 'confirmed-at', 'applying-at', 'applied-at'] },
  },
];

describe('decideAdvance', () => {
  it.each(CASES.map((test) => [test.name, test] as const))('%s', (_, test) => {
    expect(decideAdvance(test.run, test.stages, test.results, TIMEOUTS)).toMatchObject(test.expected);
  });

  it.each(RUN_STATUSES.map((status) => [status]))(
    'from %s with no stages: leaves its inputs alone, runs the executor once per plan or apply, and moves no ended run',
    (status) => {
      const snapshot = run(status, { autoApply: true });
      const before = JSON.stringify(snapshot);
      const decision = decideAdvance(snapshot, [], [], TIMEOUTS);
      expect(JSON.stringify(snapshot)).toBe(before);
      const executed = decision.runTransitions.filter((key) => key === 'planned-at' || key === 'applied-at').length;
      expect(decision.executions).toHaveLength(executed);
      if (ENDED_RUNS.has(status)) expect(decision.runTransitions).toEqual([]);
      if (decision.runTransitions.length === 0) expect(decision.runStatus).toBe(status);
    },
  );
});
