import { describe, expect, it } from '@jest/globals';
import { RUN_STATUS_GROUPS, statusesOfGroup } from './run-status-groups.ts';
import { RUN_STATUSES } from './statuses.ts';

describe('run status groups', () => {
  it.each([
    ['final', ['applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled']],
    [
      'discardable',
      [
        'pending',
        'pre_plan_awaiting_decision',
        'planned',
        'post_plan_running',
        'post_plan_completed',
        'post_plan_awaiting_decision',
        'pre_apply_awaiting_decision',
      ],
    ],
  ] as const)('%s holds %j', (group, statuses) => {
    expect([...statusesOfGroup(group)].sort()).toEqual([...statuses].sort());
  });

  it('final and non_final split every status between them', () => {
    const split = [...statusesOfGroup('final'), ...statusesOfGroup('non_final')];
    expect([...split].sort()).toEqual([...RUN_STATUSES].sort());
    expect(new Set(split).size).toBe(RUN_STATUSES.length);
  });

  it('names the three groups HCP documents', () => {
    expect(RUN_STATUS_GROUPS).toEqual(['non_final', 'final', 'discardable']);
  });
});
