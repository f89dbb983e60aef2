/** One active token as loaded: the keyed hash the database stores, and its expiry. */
export interface ActiveTokenRow {
  token_hash: string;
  expires_at: string | Date | null;
}

export interface ActiveTokensOptions {
  /** The active tokens (not revoked, not expired), at most `limit` rows. */
  load: (limit: number) => Promise<ActiveTokenRow[]>;
  /** Tokens held at most; with more active than that, the set is not used (every verdict is `unsure`). */
  maxEntries: number;
  /** The wall clock, for expiry (default Date.now). */
  now?: () => number;
  /** Told when a load failed (it is retried on the next change). */
  onLoadError?: (error: unknown) => void;
}

/**
 * What the set says of a token's keyed hash: `active` (one of the active tokens' as last loaded, and not
 * expired), `unknown` (no active token has it, and the set is current), `unsure` (the set is being
 * reloaded after a change, was never loaded, or overflowed).
 */
export type TokenVerdict = 'active' | 'unknown' | 'unsure';

/** Hex digits of the keyed hash kept: 48 bits, an exact integer, so an entry is a number, not a string. */
const KEY_HEX_DIGITS = 12;

/**
 * The keyed hashes of the active API tokens, held in memory so that a token no active one matches costs
 * no database work, and one that matches is never refused for what its address sent besides.
 *
 * Each is held as its first 48 bits (a number in a Map, with its expiry): a collision can only make an
 * unknown token `active`, which sends it to the database lookup that refuses it, as before this set; a
 * random token collides with one of 100,000 active ones once in 2.8 billion. The set knows nothing of
 * the database's changes: its owner calls `changed()` on each notification that a token may have been
 * created, revoked or rebound, and the set reloads (one statement, coalesced) and is `unsure` of unknown
 * tokens until the load that began after the last change has finished.
 */
export class ActiveTokens {
  private hashes = new Map<number, number>();
  private generation = 0;
  private loadedGeneration = -1;
  private overflow = false;
  private loading: Promise<void> | undefined;
  private readonly options: ActiveTokensOptions;
  private readonly now: () => number;

  constructor(options: ActiveTokensOptions) {
    this.options = options;
    this.now = options.now ?? (() => Date.now());
  }

  /** Whether the last load began after the last change and held every active token. */
  get current(): boolean {
    return this.loadedGeneration === this.generation && !this.overflow;
  }

  get size(): number {
    return this.hashes.size;
  }

  /** The verdict on a keyed hash (hex, as `SecretBox.hashToken` makes it). */
  verdict(tokenHash: string): TokenVerdict {
    const key = keyOf(tokenHash);
    const expiresAt = key === undefined ? undefined : this.hashes.get(key);
    if (expiresAt !== undefined && expiresAt > this.now()) return 'active';
    return this.current ? 'unknown' : 'unsure';
  }

  /** Something may have changed: unknown tokens are `unsure` until a load that begins now has finished. */
  changed(): Promise<void> {
    this.generation += 1;
    return this.reload();
  }

  /** Resolves when no load is under way (the one that was has finished). */
  async settled(): Promise<void> {
    await this.loading;
  }

  /** One load at a time; a change during a load makes another follow it. */
  private reload(): Promise<void> {
    this.loading ??= this.loadUntilCurrent().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async loadUntilCurrent(): Promise<void> {
    while (this.loadedGeneration !== this.generation) {
      const generation = this.generation;
      let rows: ActiveTokenRow[];
      try {
        rows = await this.options.load(this.options.maxEntries + 1);
      } catch (error) {
        this.options.onLoadError?.(error);
        return;
      }
      const hashes = new Map<number, number>();
      for (const row of rows) {
        const key = keyOf(row.token_hash);
        if (key === undefined) continue;
        const expiresAt = row.expires_at === null ? Number.POSITIVE_INFINITY : new Date(row.expires_at).getTime();
        hashes.set(key, Math.max(expiresAt, hashes.get(key) ?? Number.NEGATIVE_INFINITY));
      }
      this.overflow = rows.length > this.options.maxEntries;
      this.hashes = this.overflow ? new Map() : hashes;
      this.loadedGeneration = generation;
    }
  }
}

function keyOf(tokenHash: string): number | undefined {
  const key = Number.parseInt(tokenHash.slice(0, KEY_HEX_DIGITS), 16);
  return Number.isSafeInteger(key) ? key : undefined;
}
