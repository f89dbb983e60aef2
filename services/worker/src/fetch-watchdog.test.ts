import { describe, expect, it } from '@jest/globals';
import { fetchStalled, type FetchState } from './fetch-watchdog.ts';

const STALL = 60_000;
const at = (now: number, waitingSince: number | undefined, lastStartAt: number): FetchState => ({
  now,
  waitingSince,
  lastStartAt,
  stallMs: STALL,
});

describe('fetchStalled: jobs waited for the whole stall time while the worker had room and took none', () => {
  it.each<[string, FetchState, boolean]>([
    ['nothing waits', at(100_000, undefined, 0), false],
    ['jobs wait, but not for long yet', at(100_000, 100_000 - STALL + 1, 0), false],
    ['jobs waited the whole time and none was taken', at(100_000, 100_000 - STALL, 0), true],
    ['jobs waited long, but one was taken lately', at(100_000, 0, 100_000 - STALL + 1), false],
    ['jobs waited long, and the last one was taken a stall time ago', at(100_000, 0, 100_000 - STALL), true],
    ['just made: its start counts as a job taken', at(100_000, 0, 100_000), false],
  ])('%s → %s', (_label, state, expected) => {
    expect(fetchStalled(state)).toBe(expected);
  });
});
