import type { Logger } from '@runtasks/shared/logger';

export interface RefusalLogOptions {
  logger: Logger;
  /** How long one address's refusals are summed before their summary line (default 60 s). */
  intervalMs?: number;
  /** Addresses followed at most; past that, a new address's refusals are only counted in `dropped`. */
  maxAddresses?: number;
}

interface AddressTally {
  counts: Record<string, number>;
  total: number;
}

const DEFAULT_INTERVAL_MS = 60_000;
const DEFAULT_MAX_ADDRESSES = 10_000;

/**
 * Refused requests (401 and 429) logged as a sample: the first of an address in an interval at once (its
 * request line), then one summary line per address per interval with how many more, by status. A flood
 * of bad tokens then writes two lines a minute per address, not one per request.
 */
export class RefusalLog {
  private tallies = new Map<string, AddressTally>();
  private dropped = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly options: Required<RefusalLogOptions>;

  constructor(options: RefusalLogOptions) {
    this.options = { intervalMs: DEFAULT_INTERVAL_MS, maxAddresses: DEFAULT_MAX_ADDRESSES, ...options };
    this.timer = setInterval(() => this.flush(), this.options.intervalMs);
    this.timer.unref();
  }

  /** Counts a refusal; true when it is the address's first in this interval (its own line should be written). */
  record(address: string, status: number): boolean {
    const tally = this.tallies.get(address);
    if (tally) {
      tally.counts[status] = (tally.counts[status] ?? 0) + 1;
      tally.total += 1;
      return false;
    }
    if (this.tallies.size >= this.options.maxAddresses) {
      this.dropped += 1;
      return false;
    }
    this.tallies.set(address, { counts: {}, total: 0 });
    return true;
  }

  /** Writes the interval's summary lines (the refusals after each address's first) and starts a new interval. */
  flush(): void {
    const tallies = this.tallies;
    const dropped = this.dropped;
    this.tallies = new Map();
    this.dropped = 0;
    const seconds = this.options.intervalMs / 1000;
    for (const [address, tally] of tallies) {
      if (tally.total > 0) this.options.logger.info({ address, refused: tally.total, statuses: tally.counts, seconds }, 'requests refused');
    }
    if (dropped > 0) this.options.logger.info({ refused: dropped, seconds }, 'requests refused from addresses past the ones followed');
  }

  stop(): void {
    clearInterval(this.timer);
    this.flush();
  }
}
