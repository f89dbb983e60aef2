import { describe, expect, it } from '@jest/globals';
import { ApiError } from '@runtasks/shared/errors';
import { FailedAuthLimit } from './failed-auth-limit.ts';
import { RefusedTokens } from './refused-tokens.ts';

/** A clock the test moves. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let now = 1_000;
  return { now: () => now, advance: (ms) => void (now += ms) };
}

describe('FailedAuthLimit: failed authentications by address', () => {
  it.each<[string, number, number, number]>([
    // name, failures recorded, ms later, blocked for (ms; 0: may try)
    ['no failure: may try', 0, 0, 0],
    ['below the limit: may try', 2, 0, 0],
    ['at the limit: refused until the window ends', 3, 0, 60_000],
    ['at the limit, later in the window: the rest of it', 3, 45_000, 15_000],
    ['at the limit, after the window: may try again', 3, 60_000, 0],
    ['past the limit: the same window', 10, 1_000, 59_000],
  ])('%s', (_name, failures, later, blocked) => {
    const clock = manualClock();
    const limit = new FailedAuthLimit({ limit: 3, windowMs: 60_000, clock: clock.now });
    for (let index = 0; index < failures; index += 1) limit.recordFailure('192.0.2.1');
    clock.advance(later);
    expect(limit.blockedForMs('192.0.2.1')).toBe(blocked);
    // Another address is counted on its own.
    expect(limit.blockedForMs('192.0.2.2')).toBe(0);
  });

  it('refuses with a 429 carrying Retry-After in whole seconds', () => {
    const clock = manualClock();
    const limit = new FailedAuthLimit({ limit: 1, windowMs: 60_000, clock: clock.now });
    limit.check('198.51.100.7');
    limit.recordFailure('198.51.100.7');
    clock.advance(500);
    let thrown: unknown;
    try {
      limit.check('198.51.100.7');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ status: 429, headers: { 'Retry-After': '60' } });
  });

  it.each<[string, number, number, boolean]>([
    // name, failures recorded at one address, ms later, some address may be refused
    ['no failure', 0, 0, false],
    ['below the limit', 2, 0, false],
    ['at the limit', 3, 0, true],
    ['at the limit, at the end of its window', 3, 59_999, true],
    ['after the window', 3, 60_000, false],
  ])('knows cheaply whether any address may be refused: %s', (_name, failures, later, mayRefuse) => {
    const clock = manualClock();
    const limit = new FailedAuthLimit({ limit: 3, windowMs: 60_000, clock: clock.now });
    for (let index = 0; index < failures; index += 1) limit.recordFailure('192.0.2.1');
    clock.advance(later);
    expect(limit.mayRefuseAny()).toBe(mayRefuse);
    expect(limit.mayRefuseAny()).toBe(limit.blockedForMs('192.0.2.1') > 0);
  });

  it('remembers a bounded number of addresses, the oldest window going first', () => {
    const limit = new FailedAuthLimit({ limit: 1, maxAddresses: 2, clock: manualClock().now });
    for (const address of ['a', 'b', 'c']) limit.recordFailure(address);
    expect(['a', 'b', 'c'].map((address) => limit.blockedForMs(address) > 0)).toEqual([false, true, true]);
  });
});

describe('RefusedTokens: tokens refused a moment ago', () => {
  it.each<[string, number, boolean]>([
    ['just refused', 0, true],
    ['within the TTL', 4_999, true],
    ['past the TTL', 5_000, false],
  ])('%s → remembered: %s', (_name, later, remembered) => {
    const clock = manualClock();
    const refused = new RefusedTokens({ ttlMs: 5_000, maxEntries: 10, clock: clock.now });
    expect(refused.remember('k', refused.epoch)).toBe(true);
    clock.advance(later);
    expect(refused.has('k')).toBe(remembered);
  });

  it('does not remember a refusal whose lookup began before a forget (a token created meanwhile)', () => {
    const refused = new RefusedTokens({ ttlMs: 5_000, maxEntries: 10, clock: manualClock().now });
    const epoch = refused.epoch;
    refused.forgetAll();
    expect(refused.remember('k', epoch)).toBe(false);
    expect(refused.has('k')).toBe(false);
  });

  it('forgets everything at once, and keeps at most maxEntries (oldest out)', () => {
    const refused = new RefusedTokens({ ttlMs: 5_000, maxEntries: 2, clock: manualClock().now });
    for (const key of ['a', 'b', 'c']) refused.remember(key, refused.epoch);
    expect(['a', 'b', 'c'].map((key) => refused.has(key))).toEqual([false, true, true]);
    refused.forgetAll();
    expect(refused.size).toBe(0);
  });

  it('remembers nothing with a TTL of 0 (the cache off)', () => {
    const refused = new RefusedTokens({ ttlMs: 0, maxEntries: 2 });
    expect(refused.remember('k', refused.epoch)).toBe(false);
  });
});
