import { describe, expect, it } from '@jest/globals';
import { nextRunStep, type RunSnapshot, type RunStep, type StageSnapshot } from './lifecycle.ts';
import { runActionSubject, runActionTarget } from './run-transitions.ts';
import type { RunStatus } from './statuses.ts';

const run = (status: RunStatus, more: Partial<RunSnapshot> = {}): RunSnapshot => ({
  status,
  planOnly: false,
  autoApply: false,
  overridesEnabled: false,
  ...more,
});
const local = (status: RunStatus, more: Partial<RunSnapshot> = {}): RunSnapshot => run(status, { executionMode: 'local', ...more });
const WAIT: RunStep = { kind: 'wait' };
const passedPostPlan: StageSnapshot = {
  stage: 'post_plan',
  status: 'running',
  overridden: false,
  evaluation: { status: 'passed', warning: false },
};

describe('the lifecycle of local runs (the pipeline reports plan and apply)', () => {
  // prettier-ignore
  it.each<[string, RunSnapshot, readonly StageSnapshot[], RunStep]>([
    ['remote planning: the built-in executor plans',        run('planning'),                                   [], { kind: 'plan' }],
    ['remote applying: the built-in executor applies',      run('applying'),                                   [], { kind: 'apply' }],
    ['local planning: waits for the plan report',           local('planning'),                                 [], WAIT],
    ['local applying: waits for the apply report',          local('applying'),                                 [], WAIT],
    ['local planning past the timeout: ends',               local('planning', { reportOverdue: true }),        [], { kind: 'report-overdue', awaited: 'planning' }],
    ['local applying past the timeout: ends',               local('applying', { reportOverdue: true }),        [], { kind: 'report-overdue', awaited: 'applying' }],
    ['overdue means nothing once the report came',          local('planned', { reportOverdue: true, hasChanges: true, autoApply: true }), [], { kind: 'set-run', status: 'confirmed' }],
    ['a plan with changes, auto-apply: confirms',           local('planned', { hasChanges: true, autoApply: true }), [], { kind: 'set-run', status: 'confirmed' }],
    ['a plan with changes: waits for a person',             local('planned', { hasChanges: true }),            [], WAIT],
    ['no changes, no post_plan tasks: planned and finished', local('planned', { hasChanges: false, autoApply: true }), [], { kind: 'set-run', status: 'planned_and_finished' }],
    ['no changes: post_plan tasks run first',               local('planned', { hasChanges: false }),           [{ ...passedPostPlan, status: 'pending', evaluation: null }], { kind: 'start-stage', stage: 'post_plan', runStatus: 'post_plan_running' }],
    ['no changes: after post_plan, planned and finished',   local('post_plan_completed', { hasChanges: false, autoApply: true }), [], { kind: 'set-run', status: 'planned_and_finished' }],
    ['a remote plan always goes on (as before reports)',    run('planned', { hasChanges: false, autoApply: true }), [], { kind: 'set-run', status: 'confirmed' }],
  ])('%s', (_, snapshot, stages, step) => {
    expect(nextRunStep(snapshot, stages)).toEqual(step);
  });

  it('a local run whose plan changes nothing cannot be confirmed; one whose plan changes something can', () => {
    const subject = (hasChanges: boolean) =>
      runActionSubject({ status: 'post_plan_completed', planOnly: false, executionMode: 'local', hasChanges });
    expect(runActionTarget('apply', subject(false))).toBeNull();
    expect(runActionTarget('apply', subject(true))).toBe('confirmed');
    expect(runActionTarget('discard', subject(false))).toBe('discarded');
    // A remote run's plan is the built-in executor's: confirmable as before.
    expect(
      runActionTarget('apply', runActionSubject({ status: 'planned', planOnly: false, executionMode: 'remote', hasChanges: false })),
    ).toBe('confirmed');
  });
});
