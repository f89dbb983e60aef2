import { ApiError } from '@runtasks/shared/errors';

export interface FailedAuthLimitOptions {
  /** Failed authentications an address may have in a window before it is refused (429) without a lookup. */
  limit: number;
  windowMs?: number;
  /** Addresses remembered at most; the oldest window goes first. */
  maxAddresses?: number;
  /** A monotonic clock (default performance.now). */
  clock?: () => number;
}

const DEFAULT_WINDOW_MS = 60_000;
const DEFAULT_MAX_ADDRESSES = 100_000;

/**
 * Counts failed authentications by client address in this process, and refuses an address that has had
 * `limit` of them within a window until the window ends: guessing tokens (an operator-chosen ADMIN_TOKEN
 * is shorter than ours) and floods of random ones then cost no database lookup. In memory, so it costs a
 * request nothing and holds while Redis is away; each API process counts on its own.
 */
export class FailedAuthLimit {
  private readonly windows = new Map<string, { startedAt: number; failures: number }>();
  private readonly options: Required<FailedAuthLimitOptions>;

  constructor(options: FailedAuthLimitOptions) {
    this.options = { windowMs: DEFAULT_WINDOW_MS, maxAddresses: DEFAULT_MAX_ADDRESSES, clock: () => performance.now(), ...options };
  }

  get limit(): number {
    return this.options.limit;
  }

  /** How long the address is still refused (0: it may try). */
  blockedForMs(address: string): number {
    const window = this.current(address);
    if (!window || window.failures < this.options.limit) return 0;
    return Math.max(1, window.startedAt + this.options.windowMs - this.options.clock());
  }

  /** Throws the 429 while the address is refused. */
  check(address: string): void {
    const blockedMs = this.blockedForMs(address);
    if (blockedMs === 0) return;
    const retryAfter = Math.ceil(blockedMs / 1000);
    throw new ApiError(
      429,
      'too many requests',
      `Too many failed authentications from this address; retry after ${retryAfter} s.`,
      undefined,
      { 'Retry-After': String(retryAfter) },
    );
  }

  recordFailure(address: string): void {
    const window = this.current(address);
    if (window) {
      window.failures += 1;
      return;
    }
    while (this.windows.size >= this.options.maxAddresses) {
      const oldest = this.windows.keys().next();
      if (oldest.done) break;
      this.windows.delete(oldest.value);
    }
    this.windows.set(address, { startedAt: this.options.clock(), failures: 1 });
  }

  private current(address: string): { startedAt: number; failures: number } | undefined {
    const window = this.windows.get(address);
    if (window && this.options.clock() - window.startedAt >= this.options.windowMs) {
      this.windows.delete(address);
      return undefined;
    }
    return window;
  }
}
