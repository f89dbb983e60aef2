import { describe, expect, it } from '@jest/globals';
import { OUTCOME_LIMITS, outcomeLimitBreach } from './outcome-limits.ts';

const { perResult, bodyBytesPerResult } = OUTCOME_LIMITS;

describe('outcomeLimitBreach', () => {
  it.each([
    ['nothing stored, nothing added', { count: 0, bodyBytes: 0 }, { count: 0, bodyBytes: 0 }, undefined],
    ['exactly the count', { count: perResult - 250, bodyBytes: 0 }, { count: 250, bodyBytes: 0 }, undefined],
    ['one past the count', { count: perResult - 250, bodyBytes: 0 }, { count: 251, bodyBytes: 0 }, `at most ${perResult} outcomes`],
    ['already full, adding none', { count: perResult, bodyBytes: bodyBytesPerResult }, { count: 0, bodyBytes: 0 }, undefined],
    ['exactly the bytes', { count: 1, bodyBytes: bodyBytesPerResult - 10 }, { count: 1, bodyBytes: 10 }, undefined],
    ['one byte past', { count: 1, bodyBytes: bodyBytesPerResult - 10 }, { count: 1, bodyBytes: 11 }, `at most ${bodyBytesPerResult} bytes`],
  ])('%s', (_label, stored, adding, expected) => {
    const breach = outcomeLimitBreach(stored, adding);
    if (expected === undefined) expect(breach).toBeUndefined();
    else expect(breach).toContain(expected);
  });
});
