import { describe, expect, it } from '@jest/globals';
import { parseRetryAfter, retryDelayMs } from './retry-after.ts';

const NOW = Date.parse('2026-11-23T10:00:00Z');

describe('parseRetryAfter', () => {
  it.each<[string | string[] | undefined, number | undefined]>([
    [undefined, undefined],
    ['', undefined],
    ['0', 0],
    ['7', 7_000],
    [' 120 ', 120_000],
    [['3', '9'], 3_000],
    ['-1', undefined],
    ['1.5', undefined],
    ['soon', undefined],
    ['Mon, 23 Nov 2026 10:00:30 GMT', 30_000],
    ['Monday, 23-Nov-26 10:00:05 GMT', 5_000],
    ['Mon Nov 23 10:00:30 2026', 30_000],
    ['Mon, 23 Nov 2026 09:59:00 GMT', 0],
    ['Mon, 99 Nov 2026 10:00:30 GMT', undefined],
  ])('%j → %j ms', (header, expected) => {
    expect(parseRetryAfter(header, NOW)).toBe(expected);
  });
});

describe('retryDelayMs', () => {
  it.each<[number, number | undefined, number]>([
    [1_000, undefined, 1_000],
    [1_000, 0, 1_000],
    [1_000, 500, 1_000],
    [1_000, 1_500, 1_500],
    [1_000, 2_000, 2_000],
    [1_000, 60_000, 2_000],
    [0, 5_000, 0],
  ])('base %d ms, Retry-After %j ms → %d ms', (base, retryAfter, expected) => {
    expect(retryDelayMs(base, retryAfter)).toBe(expected);
  });
});
