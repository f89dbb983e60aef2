import { describe, expect, it } from '@jest/globals';
import { RUN_STATUSES, TASK_RESULT_STATUSES, TASK_STAGE_STATUSES } from './statuses.ts';
import { statusTimestampKey } from './timestamps.ts';

describe('statusTimestampKey', () => {
  it.each([
    ['pending', 'pending-at'],
    ['pre_plan_running', 'pre-plan-running-at'],
    ['post_plan_awaiting_decision', 'post-plan-awaiting-decision-at'],
    ['planned_and_finished', 'planned-and-finished-at'],
    ['confirmed', 'confirmed-at'],
    ['canceled', 'canceled-at'],
    ['awaiting_override', 'awaiting-override-at'],
    ['', '-at'],
  ])('%s → %s', (status, key) => {
    expect(statusTimestampKey(status)).toBe(key);
  });

  it.each([...new Set<string>([...RUN_STATUSES, ...TASK_STAGE_STATUSES, ...TASK_RESULT_STATUSES])])(
    '%s gives a hyphenated key ending in -at with no underscores',
    (status) => {
      const key = statusTimestampKey(status);
      expect(key).toMatch(/^[a-z-]+-at$/);
      expect(key).not.toContain('_');
      expect(key.slice(0, -3).replaceAll('-', '_')).toBe(status);
    },
  );

  it('distinct run statuses give distinct keys', () => {
    const keys = RUN_STATUSES.map(statusTimestampKey);
    expect(new Set(keys).size).toBe(RUN_STATUSES.length);
  });
});
