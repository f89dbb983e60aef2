import { describe, expect, it } from '@jest/globals';
import { readPlan, type PlanSummary } from './plan-summary.ts';

const resource = (actions: unknown, extra: Record<string, unknown> = {}, mode = 'managed', previousAddress?: string) => ({
  address: 'x.y',
  ...(previousAddress !== undefined && { previous_address: previousAddress }),
  mode,
  change: { actions, ...extra },
});
const plan = (resourceChanges: unknown[], more: Record<string, unknown> = {}) => ({
  format_version: '1.2',
  resource_changes: resourceChanges,
  ...more,
});
const summary = (additions: number, changes: number, destructions: number, imports: number, hasChanges: boolean): PlanSummary => ({
  resourceAdditions: additions,
  resourceChanges: changes,
  resourceDestructions: destructions,
  resourceImports: imports,
  hasChanges,
});

describe('readPlan: what a plan changes, counted as HCP counts it', () => {
  it.each<[string, unknown, PlanSummary]>([
    ['create', plan([resource(['create'])]), summary(1, 0, 0, 0, true)],
    ['update', plan([resource(['update'])]), summary(0, 1, 0, 0, true)],
    ['delete', plan([resource(['delete'])]), summary(0, 0, 1, 0, true)],
    ['replace, destroy first', plan([resource(['delete', 'create'])]), summary(1, 0, 1, 0, true)],
    ['replace, create first', plan([resource(['create', 'delete'])]), summary(1, 0, 1, 0, true)],
    ['import without change', plan([resource(['no-op'], { importing: { id: 'i-1' } })]), summary(0, 0, 0, 1, true)],
    ['import with an update', plan([resource(['update'], { importing: { id: 'i-1' } })]), summary(0, 1, 0, 1, true)],
    ['no-op', plan([resource(['no-op'])]), summary(0, 0, 0, 0, false)],
    ['a data source read', plan([resource(['read'], {}, 'data')]), summary(0, 0, 0, 0, false)],
    ['a data source never counts', plan([resource(['create'], {}, 'data')]), summary(0, 0, 0, 0, false)],
    ['importing null is no import', plan([resource(['no-op'], { importing: null })]), summary(0, 0, 0, 0, false)],
    [
      'no resource_changes member (Terraform leaves it out when empty)',
      { format_version: '1.2', planned_values: {} },
      summary(0, 0, 0, 0, false),
    ],
    ['an output to change only', plan([], { output_changes: { ip: { actions: ['update'] } } }), summary(0, 0, 0, 0, true)],
    ['outputs unchanged', plan([], { output_changes: { ip: { actions: ['no-op'] } } }), summary(0, 0, 0, 0, false)],
    [
      'a mix',
      plan([resource(['create']), resource(['create']), resource(['update']), resource(['delete', 'create']), resource(['delete'])]),
      summary(3, 1, 2, 0, true),
    ],
    // Terraform 1.1+: a moved resource is a no-op whose previous_address differs; 1.7+: a removed block that keeps the object is a forget.
    ['a move only (before Terraform wrote applyable)', plan([resource(['no-op'], {}, 'managed', 'x.old')]), summary(0, 0, 0, 0, true)],
    ['previous_address equal to address is no move', plan([resource(['no-op'], {}, 'managed', 'x.y')]), summary(0, 0, 0, 0, false)],
    ['a forget only', plan([resource(['forget'])]), summary(0, 0, 0, 0, true)],
    ['a data source with a previous_address moves nothing', plan([resource(['read'], {}, 'data', 'x.old')]), summary(0, 0, 0, 0, false)],
  ])('%s', (_, document, expected) => {
    expect(readPlan(document)).toEqual({ ok: true, summary: expected, errored: false });
  });

  // Terraform 1.8 and later write `applyable` in every plan: it decides, whatever the counts say.
  it.each<[string, unknown, PlanSummary]>([
    ['applyable with no resource change (a refresh-only plan with drift)', plan([], { applyable: true }), summary(0, 0, 0, 0, true)],
    ['applyable with a move only', plan([resource(['no-op'], {}, 'managed', 'x.old')], { applyable: true }), summary(0, 0, 0, 0, true)],
    ['applyable with a forget only', plan([resource(['forget'])], { applyable: true }), summary(0, 0, 0, 0, true)],
    ['not applyable with no-ops', plan([resource(['no-op'])], { applyable: false }), summary(0, 0, 0, 0, false)],
    [
      'not applyable with an output change (Terraform before 1.10)',
      plan([], { applyable: false, output_changes: { ip: { actions: ['update'] } } }),
      summary(0, 0, 0, 0, false),
    ],
    ['applyable with changes', plan([resource(['create'])], { applyable: true, complete: true }), summary(1, 0, 0, 0, true)],
  ])('%s', (_, document, expected) => {
    expect(readPlan(document)).toEqual({ ok: true, summary: expected, errored: false });
  });

  it.each<[string, unknown, PlanSummary]>([
    [
      'errored, not applyable, with a listed create',
      plan([resource(['create'])], { errored: true, applyable: false }),
      summary(1, 0, 0, 0, false),
    ],
    ['errored without applyable (Terraform 1.6 and 1.7)', plan([resource(['create'])], { errored: true }), summary(1, 0, 0, 0, false)],
    [
      'errored yet applyable (not written by Terraform): still nothing to apply',
      plan([], { errored: true, applyable: true }),
      summary(0, 0, 0, 0, false),
    ],
  ])('an errored plan: %s', (_, document, expected) => {
    expect(readPlan(document)).toEqual({ ok: true, summary: expected, errored: true });
  });

  it('applyable null is as absent: the counts decide', () => {
    expect(readPlan(plan([resource(['create'])], { applyable: null, errored: null }))).toEqual({
      ok: true,
      summary: summary(1, 0, 0, 0, true),
      errored: false,
    });
  });

  it('errored: false is no error', () => {
    expect(readPlan(plan([resource(['create'])], { errored: false, applyable: true }))).toEqual({
      ok: true,
      summary: summary(1, 0, 0, 0, true),
      errored: false,
    });
  });

  it.each<[string, unknown, string]>([
    ['an array', [plan([])], ''],
    ['a string', 'plan', ''],
    ['null', null, ''],
    ['no format_version (a state document)', { values: {} }, '/format_version'],
    ['a numeric format_version', { format_version: 1, resource_changes: [] }, '/format_version'],
    ['a state document with a format_version', { format_version: '1.0', values: {} }, ''],
    ['resource_changes not an array', { format_version: '1.2', resource_changes: {} }, '/resource_changes'],
    ['a resource change not an object', plan(['x']), '/resource_changes/0'],
    ['a change without actions', plan([resource(undefined)]), '/resource_changes/0/change/actions'],
    ['actions not a list of names', plan([resource(['create']), resource([1])]), '/resource_changes/1/change/actions'],
    ['a resource without a change', plan([{ address: 'a.b', mode: 'managed' }]), '/resource_changes/0/change'],
    ['output_changes not an object', plan([], { output_changes: [] }), '/output_changes'],
    ['an output change without actions, its name escaped', plan([], { output_changes: { 'a/b': {} } }), '/output_changes/a~1b/actions'],
    ['applyable not a boolean', plan([], { applyable: 'yes' }), '/applyable'],
    ['errored not a boolean', plan([], { errored: 1 }), '/errored'],
  ])('refuses %s, pointing at %j', (_, document, pointer) => {
    const reading = readPlan(document);
    expect(reading.ok).toBe(false);
    if (!reading.ok) {
      expect(reading.pointer).toBe(pointer);
      expect(reading.detail.length).toBeGreaterThan(0);
    }
  });
});
