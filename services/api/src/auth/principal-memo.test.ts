import { describe, expect, it } from '@jest/globals';
import { PrincipalMemo, type KnownToken } from './principal-memo.ts';

const T0 = Date.parse('2026-11-24T00:00:00Z');

function known(id: string, expiresAt: number | null = null): KnownToken {
  return {
    principal: { kind: 'organization', tokenId: id, organizationId: 'org-1' },
    tokenId: id,
    expiresAt: expiresAt === null ? null : new Date(expiresAt),
    lastUsedAt: null,
  };
}

/** A memo on clocks the test moves: the wall clock and the monotonic one together, unless told otherwise. */
function memo(ttlMs = 10_000, maxEntries = 100): { memo: PrincipalMemo; at: (ms: number) => void; wallAt: (ms: number) => void } {
  let wall = T0;
  let monotonic = 0;
  return {
    memo: new PrincipalMemo({ ttlMs, maxEntries, now: () => wall, clock: () => monotonic }),
    at: (ms) => {
      wall = T0 + ms;
      monotonic = ms;
    },
    wallAt: (ms) => void (wall = T0 + ms),
  };
}

describe('PrincipalMemo', () => {
  it('recalls what it remembered, by key', () => {
    const { memo: m } = memo();
    expect(m.remember('hash-a', known('a'), m.epoch)).toBe(true);
    expect(m.recall('hash-a')?.tokenId).toBe('a');
    expect(m.recall('hash-b')).toBeUndefined();
  });

  it.each([
    ['just stored', 0, true],
    ['one ms before the TTL', 9_999, true],
    ['at the TTL', 10_000, false],
    ['past the TTL', 60_000, false],
  ])('an entry %s is %s', (_, elapsedMs, recalled) => {
    const { memo: m, at } = memo(10_000);
    m.remember('hash-a', known('a'), m.epoch);
    at(elapsedMs);
    expect(m.recall('hash-a') !== undefined).toBe(recalled);
    // A stale entry is dropped, not kept beside the fresh ones.
    expect(m.size).toBe(recalled ? 1 : 0);
  });

  it.each([
    ['no expiry', null, 5_000, true],
    ['expiring later', 6_000, 5_000, true],
    ['expiring exactly now', 5_000, 5_000, false],
    ['expired while remembered', 4_000, 5_000, false],
  ])('a token with %s is recalled: %s', (_, expiresInMs, elapsedMs, recalled) => {
    const { memo: m, at } = memo(60_000);
    m.remember('hash-a', known('a', expiresInMs === null ? null : T0 + expiresInMs), m.epoch);
    at(elapsedMs);
    expect(m.recall('hash-a') !== undefined).toBe(recalled);
  });

  it('measures the TTL on the monotonic clock: a wall clock set back does not lengthen it', () => {
    const { memo: m, at, wallAt } = memo(10_000);
    m.remember('hash-a', known('a'), m.epoch);
    at(10_000);
    wallAt(-3_600_000);
    expect(m.recall('hash-a')).toBeUndefined();
  });

  it('takes an expiry that is not a time for one that has passed', () => {
    const { memo: m } = memo();
    m.remember('hash-a', { ...known('a'), expiresAt: new Date(Number.NaN) }, m.epoch);
    expect(m.recall('hash-a')).toBeUndefined();
  });

  it('forgets everything at once', () => {
    const { memo: m } = memo();
    m.remember('hash-a', known('a'), m.epoch);
    m.remember('hash-b', known('b'), m.epoch);
    m.forgetAll();
    expect([m.recall('hash-a'), m.recall('hash-b'), m.size]).toEqual([undefined, undefined, 0]);
  });

  it('does not remember a lookup that began before it forgot (a revocation raced it)', () => {
    const { memo: m } = memo();
    const before = m.epoch;
    m.forgetAll();
    expect(m.remember('hash-a', known('a'), before)).toBe(false);
    expect(m.recall('hash-a')).toBeUndefined();
    expect(m.remember('hash-a', known('a'), m.epoch)).toBe(true);
  });

  it('remembers nothing with a TTL of zero', () => {
    const { memo: m } = memo(0);
    expect(m.remember('hash-a', known('a'), m.epoch)).toBe(false);
    expect(m.size).toBe(0);
  });

  it('holds at most maxEntries, dropping the longest remembered first', () => {
    const { memo: m } = memo(10_000, 3);
    for (const id of ['a', 'b', 'c']) m.remember(`hash-${id}`, known(id), m.epoch);
    // Remembering b again makes it the newest: a goes first, then c.
    m.remember('hash-b', known('b'), m.epoch);
    m.remember('hash-d', known('d'), m.epoch);
    expect(['a', 'b', 'c', 'd'].map((id) => m.recall(`hash-${id}`) !== undefined)).toEqual([false, true, true, true]);
    m.remember('hash-e', known('e'), m.epoch);
    expect(['b', 'c', 'd', 'e'].map((id) => m.recall(`hash-${id}`) !== undefined)).toEqual([true, false, true, true]);
    expect(m.size).toBe(3);
  });
});
