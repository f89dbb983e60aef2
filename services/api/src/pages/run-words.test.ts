import { describe, expect, it } from '@jest/globals';
import { RUN_STATUSES, type RunStatus } from '@runtasks/shared/domain';
import { duration, relative } from './components.ts';
import { stageSummary } from './run.page.ts';
import { resultWords, runWords, stageWords } from './status-words.ts';

describe('how the run page says things', () => {
  it.each([
    [[], 'no tasks'],
    [[['passed', 'mandatory']], '1 passed'],
    [
      [
        ['passed', 'mandatory'],
        ['passed', 'advisory'],
        ['failed', 'advisory'],
      ],
      '2 passed, 1 failed (advisory)',
    ],
    [
      [
        ['failed', 'advisory'],
        ['failed', 'mandatory'],
        ['running', 'mandatory'],
        ['errored', 'advisory'],
      ],
      '1 failed (mandatory), 1 failed (advisory), 1 errored, 1 running',
    ],
  ] as const)('stage summary of %j: %s', (results, expected) => {
    expect(stageSummary(results.map(([status, enforcementLevel]) => ({ status, enforcementLevel })))).toBe(expected);
  });

  it.each([
    [0, '0 ms'],
    [850, '850 ms'],
    [1_400, '1 s'],
    [42_000, '42 s'],
    [180_000, '3 min'],
    [185_000, '3 min 5 s'],
    [7_200_000, '2 h'],
    [7_800_000, '2 h 10 min'],
  ])('duration(%d) = %s', (milliseconds, expected) => {
    expect(duration(milliseconds)).toBe(expected);
  });

  it.each([
    [0, 'now'],
    [-4_000, '4 seconds ago'],
    [-61_000, '1 minute ago'],
    [-3 * 3_600_000, '3 hours ago'],
    [-86_400_000, 'yesterday'],
    [5_000, 'in 5 seconds'],
  ])('relative(%d ms) = %s', (offset, expected) => {
    const now = new Date('2026-11-27T12:00:00Z');
    expect(relative(new Date(now.getTime() + offset), now)).toBe(expected);
  });

  const run = (status: RunStatus, extra: Partial<Parameters<typeof runWords>[0]> = {}) =>
    runWords({ status, planOnly: false, autoApply: false, executionMode: 'remote', hasChanges: true, ...extra }).label;

  it('says a run needs confirmation exactly where a person must apply it', () => {
    expect(run('post_plan_completed')).toBe('Needs confirmation');
    expect(run('planned')).toBe('Needs confirmation');
    expect(run('post_plan_completed', { autoApply: true })).toBe('Post-plan tasks passed');
    expect(run('planned', { planOnly: true })).toBe('Planned');
    expect(run('planned', { executionMode: 'local', hasChanges: false })).toBe('Planned');
    expect(run('post_plan_awaiting_decision')).toBe('Awaiting override (post-plan)');
    // Every status has words of its own, never the raw status.
    for (const status of RUN_STATUSES) expect(run(status)).not.toContain('_');
  });

  it('reads an overridden stage as Overridden once it ran on, and an advisory failure as one', () => {
    expect(stageWords('passed', true)).toEqual({ label: 'Overridden', tone: 'warn' });
    expect(stageWords('running', true)).toEqual({ label: 'Overridden', tone: 'warn' });
    expect(stageWords('passed', false)).toEqual({ label: 'Passed', tone: 'ok' });
    expect(stageWords('awaiting_override', false)).toEqual({ label: 'Awaiting override', tone: 'warn' });
    expect(resultWords('failed', 'advisory')).toEqual({ label: 'Failed (advisory)', tone: 'warn' });
    expect(resultWords('failed', 'mandatory')).toEqual({ label: 'Failed', tone: 'bad' });
  });
});
