import fc from 'fast-check';
import { describe, expect, it } from '@jest/globals';
import { ENFORCEMENT_LEVELS, FINAL_RUN_STATUSES, RUN_STAGES, RUN_STATUSES, type EnforcementLevel, type RunStatus } from './statuses.ts';
import { type Outcome, type RunSetup, MAX_STEPS, simulate } from './lifecycle.simulation.ts';

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
