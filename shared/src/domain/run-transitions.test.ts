import { describe, expect, it } from '@jest/globals';
import { RUN_ACTIONS, runActionSources, runActionTarget, type RunAction } from './run-transitions.ts';
import { FINAL_RUN_STATUSES, RUN_STATUSES, type RunStatus } from './statuses.ts';

type Target = RunStatus | null;

/**
 * The whole transition table, written out by hand: for every status, what each action leads to.
 * `apply` has two columns because plan-only runs can never be applied; cancel and discard do not
 * depend on plan-only.
 */
interface Row {
  apply: Target;
  applyPlanOnly: Target;
  cancel: Target;
  discard: Target;
}

const _ = null;
const C = 'confirmed';
const X = 'canceled';
const D = 'discarded';

// prettier-ignore
const EXPECTED: Record<RunStatus, Row> = {
  pending:                     { apply: _, applyPlanOnly: _, cancel: X, discard: D },
  pre_plan_running:            { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  pre_plan_completed:          { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  pre_plan_awaiting_decision:  { apply: _, applyPlanOnly: _, cancel: _, discard: D },
  planning:                    { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  planned:                     { apply: C, applyPlanOnly: _, cancel: _, discard: D },
  post_plan_running:           { apply: _, applyPlanOnly: _, cancel: X, discard: D },
  post_plan_completed:         { apply: C, applyPlanOnly: _, cancel: _, discard: D },
  post_plan_awaiting_decision: { apply: _, applyPlanOnly: _, cancel: _, discard: D },
  confirmed:                   { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  pre_apply_running:           { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  pre_apply_completed:         { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  pre_apply_awaiting_decision: { apply: _, applyPlanOnly: _, cancel: _, discard: D },
  applying:                    { apply: _, applyPlanOnly: _, cancel: X, discard: _ },
  applied:                     { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
  post_apply_running:          { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
  post_apply_completed:        { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
  planned_and_finished:        { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
  discarded:                   { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
  errored:                     { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
  canceled:                    { apply: _, applyPlanOnly: _, cancel: _, discard: _ },
};

function expectedTarget(status: RunStatus, action: RunAction, planOnly: boolean): Target {
  const row = EXPECTED[status];
  switch (action) {
    case 'apply':
      return planOnly ? row.applyPlanOnly : row.apply;
    case 'cancel':
      return row.cancel;
    case 'discard':
      return row.discard;
  }
}

const CASES = RUN_STATUSES.flatMap((status) =>
  RUN_ACTIONS.flatMap((action) =>
    [false, true].map((planOnly) => ({ status, action, planOnly, expected: expectedTarget(status, action, planOnly) })),
  ),
);

describe('run transitions', () => {
  it('the expected table covers exactly the known statuses and actions', () => {
    expect(Object.keys(EXPECTED).sort()).toEqual([...RUN_STATUSES].sort());
    expect([...RUN_ACTIONS].sort()).toEqual(['apply', 'cancel', 'discard']);
    expect(CASES).toHaveLength(RUN_STATUSES.length * RUN_ACTIONS.length * 2);
  });

  it.each(CASES)('$action from $status (planOnly=$planOnly) → $expected', ({ status, action, planOnly, expected }) => {
    expect(runActionTarget(action, { status, planOnly })).toBe(expected);
  });

  it.each(RUN_STATUSES.map((status) => ({ status })))('plan-only $status can never be applied', ({ status }) => {
    expect(runActionTarget('apply', { status, planOnly: true })).toBeNull();
  });

  const finals = RUN_STATUSES.filter((status) => FINAL_RUN_STATUSES.has(status));
  it('the final statuses are the six terminal ones', () => {
    expect([...finals].sort()).toEqual(['applied', 'canceled', 'discarded', 'errored', 'planned_and_finished', 'post_apply_completed']);
    expect(FINAL_RUN_STATUSES.size).toBe(finals.length);
  });

  it.each(finals.flatMap((status) => RUN_ACTIONS.flatMap((action) => [false, true].map((planOnly) => ({ status, action, planOnly })))))(
    'final $status allows no $action (planOnly=$planOnly)',
    ({ status, action, planOnly }) => {
      expect(runActionTarget(action, { status, planOnly })).toBeNull();
    },
  );

  it.each(RUN_ACTIONS.map((action) => ({ action })))(
    'runActionSources($action) is exactly the statuses it may start from',
    ({ action }) => {
      const sources = runActionSources(action);
      const allowed = RUN_STATUSES.filter((status) => runActionTarget(action, { status, planOnly: false }) !== null);
      const fromTable = RUN_STATUSES.filter((status) => expectedTarget(status, action, false) !== null);
      expect(new Set(sources).size).toBe(sources.length);
      expect([...sources].sort()).toEqual([...allowed].sort());
      expect([...sources].sort()).toEqual([...fromTable].sort());
      for (const status of sources) expect(FINAL_RUN_STATUSES.has(status)).toBe(false);
    },
  );

  it('runActionSources returns a fresh array each call', () => {
    const first = runActionSources('cancel');
    first.push('applied');
    expect(runActionSources('cancel')).not.toContain('applied');
  });

  it.each([
    ['apply', 'confirmed'],
    ['cancel', 'canceled'],
    ['discard', 'discarded'],
  ] as const)('every allowed %s leads to %s', (action, target) => {
    for (const status of runActionSources(action)) expect(runActionTarget(action, { status, planOnly: false })).toBe(target);
  });
});
