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

/** The 429 of an address refused for `blockedMs` more. */
export function failedAuthRefusal(blockedMs: number): ApiError {
  const retryAfter = Math.ceil(blockedMs / 1000);
  return new ApiError(
    429,
    'too many requests',
    `Too many failed authentications from this address; retry after ${retryAfter} s.`,
    undefined,
    { 'Retry-After': String(retryAfter) },
  );
}

/**
 * Counts failed authentications by client address in this process, and refuses an address that has had
 * `limit` of them within a window until the window ends: guessing tokens (an operator-chosen ADMIN_TOKEN
 * is shorter than ours) and floods of random ones then cost no database lookup. In memory, so it costs a
 * request nothing and holds while Redis is away; each API process counts on its own.
 */
export class FailedAuthLimit {
  private readonly windows = new Map<string, { startedAt: number; failures: number }>();
  private readonly options: Required<FailedAuthLimitOptions>;
  /** When the last window that reached the limit ends: before it, some address may be refused. */
  private blockingUntil = Number.NEGATIVE_INFINITY;

  constructor(options: FailedAuthLimitOptions) {
    this.options = { windowMs: DEFAULT_WINDOW_MS, maxAddresses: DEFAULT_MAX_ADDRESSES, clock: () => performance.now(), ...options };
  }

  get limit(): number {
    return this.options.limit;
  }

  /** False when no address is refused now: a question cheaper than any address's. */
  mayRefuseAny(): boolean {
    return this.options.clock() < this.blockingUntil;
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
    if (blockedMs > 0) throw failedAuthRefusal(blockedMs);
  }

  recordFailure(address: string): void {
    const window = this.current(address) ?? this.open(address);
    window.failures += 1;
    if (window.failures >= this.options.limit) this.blockingUntil = Math.max(this.blockingUntil, window.startedAt + this.options.windowMs);
  }

  private open(address: string): { startedAt: number; failures: number } {
    while (this.windows.size >= this.options.maxAddresses) {
      const oldest = this.windows.keys().next();
      if (oldest.done) break;
      this.windows.delete(oldest.value);
    }
    const window = { startedAt: this.options.clock(), failures: 0 };
    this.windows.set(address, window);
    return window;
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
