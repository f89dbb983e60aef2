export interface RefusedTokensOptions {
  ttlMs: number;
  maxEntries: number;
  /** A monotonic clock (default performance.now). */
  clock?: () => number;
}

/**
 * The keys of tokens the database refused a moment ago (unknown, revoked, expired), so the same token
 * sent again is refused without asking it. Bounded apart from the principals a process knows, so a flood
 * of random tokens pushes out only other refusals. Like PrincipalMemo it knows nothing of the database:
 * its owner forgets everything when a token may have become valid, and a lookup that began before that
 * may not be remembered (`remember` takes the `epoch` read before it).
 */
export class RefusedTokens {
  private readonly entries = new Map<string, number>();
  private currentEpoch = 0;
  private readonly options: Required<RefusedTokensOptions>;

  constructor(options: RefusedTokensOptions) {
    this.options = { clock: () => performance.now(), ...options };
  }

  get epoch(): number {
    return this.currentEpoch;
  }

  get size(): number {
    return this.entries.size;
  }

  has(key: string): boolean {
    const storedAt = this.entries.get(key);
    if (storedAt === undefined) return false;
    if (this.options.clock() - storedAt >= this.options.ttlMs) {
      this.entries.delete(key);
      return false;
    }
    return true;
  }

  /** Remembers a refusal whose lookup began at `epoch`; false when something was forgotten since. */
  remember(key: string, epoch: number): boolean {
    if (epoch !== this.currentEpoch || this.options.ttlMs <= 0 || this.options.maxEntries <= 0) return false;
    this.entries.delete(key);
    // Oldest first out: a Map iterates in insertion order.
    while (this.entries.size >= this.options.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, this.options.clock());
    return true;
  }

  forgetAll(): void {
    this.currentEpoch += 1;
    this.entries.clear();
  }
}
