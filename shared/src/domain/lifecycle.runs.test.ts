import { describe, expect, it } from '@jest/globals';
import { type RunStatus } from './statuses.ts';
import { simulate, stageWith, allPassing, manual, auto } from './lifecycle.simulation.ts';

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
