import { describe, expect, it } from '@jest/globals';
import { resolveRunOptions, runOperation, runOptionConflict, RUN_OPERATIONS, type RunOptions } from './run-options.ts';

describe('resolveRunOptions', () => {
  it("gives HCP's defaults for a run that set nothing (and for one stored before options existed)", () => {
    const expected = {
      refresh: true,
      refreshOnly: false,
      allowEmptyApply: false,
      savePlan: false,
      terraformVersion: null,
      targetAddrs: null,
      replaceAddrs: null,
      variables: [],
      allowConfigGeneration: false,
      debuggingMode: false,
      source: 'tfe-api',
    };
    expect(resolveRunOptions({})).toEqual(expected);
    expect(resolveRunOptions(null)).toEqual(expected);
    expect(resolveRunOptions(undefined)).toEqual(expected);
  });

  it('keeps every value that was set, false included', () => {
    const given: Required<RunOptions> = {
      refresh: false,
      refreshOnly: true,
      allowEmptyApply: true,
      savePlan: true,
      terraformVersion: '1.9.0',
      targetAddrs: ['a.b'],
      replaceAddrs: ['c.d'],
      variables: [{ key: 'k', value: '"v"' }],
      allowConfigGeneration: true,
      debuggingMode: true,
      source: 'tfe-configuration-version',
    };
    expect(resolveRunOptions(given)).toEqual(given);
  });
});

describe('runOperation', () => {
  // [plan-only, destroy, options, operation]: the most specific kind wins.
  it.each<[boolean, boolean, RunOptions, string]>([
    [false, false, {}, 'plan_and_apply'],
    [true, false, {}, 'plan_only'],
    [false, true, {}, 'destroy'],
    [false, false, { refreshOnly: true }, 'refresh_only'],
    [false, false, { allowEmptyApply: true }, 'empty_apply'],
    [false, false, { savePlan: true }, 'save_plan'],
    [true, true, {}, 'plan_only'],
    [false, true, { refreshOnly: true }, 'refresh_only'],
    [false, true, { allowEmptyApply: true }, 'destroy'],
    [true, false, { savePlan: true }, 'save_plan'],
    [false, false, { refresh: false, targetAddrs: ['x'] }, 'plan_and_apply'],
  ])('plan-only %s, destroy %s, %j → %s', (planOnly, isDestroy, options, operation) => {
    expect(runOperation({ planOnly, isDestroy }, resolveRunOptions(options))).toBe(operation);
  });

  it('only ever answers one of the listed operations', () => {
    const flags = [false, true];
    for (const planOnly of flags)
      for (const isDestroy of flags)
        for (const refreshOnly of flags)
          for (const savePlan of flags)
            for (const allowEmptyApply of flags) {
              const options = resolveRunOptions({ refreshOnly, savePlan, allowEmptyApply });
              expect(RUN_OPERATIONS).toContain(runOperation({ planOnly, isDestroy }, options));
            }
  });
});

describe('runOptionConflict', () => {
  // [plan-only, destroy, options, refused attribute or null]
  it.each<[boolean, boolean, RunOptions, string | null]>([
    [false, false, {}, null],
    [true, false, { terraformVersion: '1.0.0' }, null],
    [false, false, { terraformVersion: '1.0.0' }, 'terraform-version'],
    [false, false, { refreshOnly: true }, null],
    [false, false, { refreshOnly: true, refresh: true }, null],
    [false, false, { refreshOnly: true, refresh: false }, 'refresh-only'],
    [false, true, { refreshOnly: true }, 'refresh-only'],
    [false, false, { refreshOnly: false, refresh: false }, null],
    [false, false, { replaceAddrs: ['a.b'] }, null],
    [false, false, { replaceAddrs: ['a.b'], refreshOnly: true }, 'replace-addrs'],
    [false, true, { replaceAddrs: ['a.b'] }, 'replace-addrs'],
    [false, true, { replaceAddrs: [] }, null],
    [false, false, { targetAddrs: ['a.b'], refreshOnly: true }, null],
    [false, false, { savePlan: true }, null],
    [true, false, { savePlan: true }, 'save-plan'],
    [true, false, { savePlan: false }, null],
    [false, false, { allowEmptyApply: true }, null],
    [true, false, { allowEmptyApply: true }, 'allow-empty-apply'],
    [false, true, { allowEmptyApply: true }, null],
  ])('plan-only %s, destroy %s, %j → %s', (planOnly, isDestroy, options, attribute) => {
    const conflict = runOptionConflict({ planOnly, isDestroy, options });
    expect(conflict?.attribute ?? null).toBe(attribute);
    if (conflict) expect(conflict.detail).toMatch(/\.$/);
  });
});
