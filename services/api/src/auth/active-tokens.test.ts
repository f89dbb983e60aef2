import { describe, expect, it } from '@jest/globals';
import { ActiveTokens, type ActiveTokenRow } from './active-tokens.ts';

const hashOf = (seed: string): string => seed.repeat(64).slice(0, 64);
const NOW = Date.parse('2026-11-27T12:00:00Z');

/** A set over rows a test changes; `loads` counts the statements it ran. */
function setOver(rows: ActiveTokenRow[], maxEntries = 10) {
  const state = { rows, loads: 0, gate: Promise.resolve() };
  const tokens = new ActiveTokens({
    maxEntries,
    now: () => NOW,
    load: async (limit) => {
      state.loads += 1;
      const snapshot = state.rows.slice(0, limit);
      await state.gate;
      return snapshot;
    },
  });
  return { tokens, state };
}

describe('ActiveTokens: the keyed hashes of the active tokens', () => {
  it.each<[string, ActiveTokenRow[], string, 'active' | 'unknown' | 'unsure']>([
    ['a held token', [{ token_hash: hashOf('a'), expires_at: null }], hashOf('a'), 'active'],
    ['a token no active one matches', [{ token_hash: hashOf('a'), expires_at: null }], hashOf('b'), 'unknown'],
    ['a held token not yet expired', [{ token_hash: hashOf('a'), expires_at: new Date(NOW + 1) }], hashOf('a'), 'active'],
    ['a held token that expired since the load', [{ token_hash: hashOf('a'), expires_at: new Date(NOW - 1) }], hashOf('a'), 'unknown'],
    ['an expiry given as text', [{ token_hash: hashOf('a'), expires_at: new Date(NOW + 60_000).toISOString() }], hashOf('a'), 'active'],
    ['a hash that is not hex', [{ token_hash: hashOf('a'), expires_at: null }], 'z'.repeat(64), 'unknown'],
  ])('%s', async (_name, rows, hash, verdict) => {
    const { tokens } = setOver(rows);
    await tokens.changed();
    expect(tokens.verdict(hash)).toBe(verdict);
  });

  it('is unsure of every token it does not hold until loaded, and while a load after a change is under way', async () => {
    const { tokens, state } = setOver([{ token_hash: hashOf('a'), expires_at: null }]);
    expect(tokens.verdict(hashOf('b'))).toBe('unsure');
    await tokens.changed();
    expect(tokens.verdict(hashOf('b'))).toBe('unknown');
    let release: () => void = () => undefined;
    state.gate = new Promise((resolve) => (release = resolve));
    state.rows = [...state.rows, { token_hash: hashOf('b'), expires_at: null }];
    const loading = tokens.changed();
    expect(tokens.verdict(hashOf('b'))).toBe('unsure');
    // What it held before stays active meanwhile (the database lookup still decides).
    expect(tokens.verdict(hashOf('a'))).toBe('active');
    release();
    await loading;
    expect(tokens.verdict(hashOf('b'))).toBe('active');
  });

  it('loads again when a change comes during a load, and coalesces changes into one more load', async () => {
    const { tokens, state } = setOver([]);
    let release: () => void = () => undefined;
    state.gate = new Promise((resolve) => (release = resolve));
    const first = tokens.changed();
    // Read before these changes: the token created by them is not in the first load.
    state.rows = [{ token_hash: hashOf('c'), expires_at: null }];
    void tokens.changed();
    void tokens.changed();
    release();
    await first;
    await tokens.settled();
    expect(state.loads).toBe(2);
    expect(tokens.verdict(hashOf('c'))).toBe('active');
    expect(tokens.current).toBe(true);
  });

  it('with more active tokens than it may hold, holds none and is unsure of all', async () => {
    const rows = ['a', 'b', 'c'].map((seed) => ({ token_hash: hashOf(seed), expires_at: null }));
    const { tokens } = setOver(rows, 2);
    await tokens.changed();
    expect([tokens.size, tokens.current, tokens.verdict(hashOf('a')), tokens.verdict(hashOf('d'))]).toEqual([0, false, 'unsure', 'unsure']);
  });

  it('stays unsure after a load that failed, until a change loads it', async () => {
    const errors: unknown[] = [];
    let fail = true;
    const tokens = new ActiveTokens({
      maxEntries: 10,
      load: async () => {
        if (fail) throw new Error('database away');
        return [];
      },
      onLoadError: (error) => errors.push(error),
    });
    await tokens.changed();
    expect([tokens.verdict(hashOf('a')), errors.length]).toEqual(['unsure', 1]);
    fail = false;
    await tokens.changed();
    expect(tokens.verdict(hashOf('a'))).toBe('unknown');
  });
});
