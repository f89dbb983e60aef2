import { describe, expect, it } from '@jest/globals';
import { isTagLevel, TAG_LEVELS } from './tag-levels.ts';

describe('tag levels', () => {
  it.each([
    ['none', true],
    ['info', true],
    ['warning', true],
    ['error', true],
    ['critical', false],
    ['Error', false],
    ['', false],
    [null, false],
    [3, false],
  ])('%j is a level: %s', (value, expected) => {
    expect(isTagLevel(value)).toBe(expected);
  });

  it('orders the levels from least to most severe', () => {
    expect(TAG_LEVELS).toEqual(['none', 'info', 'warning', 'error']);
  });
});
