import type { Principal } from './principal.ts';

/** A token's principal as the database had it, with what a hit must still check. */
export interface KnownToken {
  principal: Principal;
  tokenId: string;
  /** Checked on every hit: a token may expire while it is remembered. */
  expiresAt: Date | null;
  /** When the database last recorded a use; the caller refreshes it at most once a minute. */
  lastUsedAt: Date | null;
}

export interface PrincipalMemoOptions {
  ttlMs: number;
  maxEntries: number;
  /** The wall clock, for tokens' expiry (default Date.now). */
  now?: () => number;
  /** A monotonic clock, for the TTL: a wall clock set back must not lengthen it (default performance.now). */
  clock?: () => number;
}

/**
 * Principals by a key made of their token (`principalMemoKey`), for at most `ttlMs`. It knows nothing
 * of the database: its owner says when to forget everything (`forgetAll`). A lookup that began before
 * the last `forgetAll` may not be remembered (`remember` takes the `epoch` read before the lookup), or
 * a revocation that raced it would be undone by a row read before the revocation committed.
 */
export class PrincipalMemo {
  private readonly entries = new Map<string, { token: KnownToken; storedAt: number }>();
  private currentEpoch = 0;
  private readonly options: Required<PrincipalMemoOptions>;

  constructor(options: PrincipalMemoOptions) {
    this.options = { now: () => Date.now(), clock: () => performance.now(), ...options };
  }

  get epoch(): number {
    return this.currentEpoch;
  }

  get size(): number {
    return this.entries.size;
  }

  recall(key: string): KnownToken | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    // An expiry that is not a time (a row without the column) counts as passed.
    const expiresAt = entry.token.expiresAt === null ? Number.POSITIVE_INFINITY : entry.token.expiresAt.getTime();
    if (this.options.clock() - entry.storedAt >= this.options.ttlMs || !(expiresAt > this.options.now())) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.token;
  }

  /** Remembers a lookup that began at `epoch`; false when something was forgotten since. */
  remember(key: string, token: KnownToken, epoch: number): boolean {
    if (epoch !== this.currentEpoch || this.options.ttlMs <= 0) return false;
    this.entries.delete(key);
    // Oldest first out: a Map iterates in insertion order.
    while (this.entries.size >= this.options.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, { token, storedAt: this.options.clock() });
    return true;
  }

  forgetAll(): void {
    this.currentEpoch += 1;
    this.entries.clear();
  }
}
