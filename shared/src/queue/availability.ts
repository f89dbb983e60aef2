import type { Logger } from '../logger.ts';

/** How often a lost Redis is probed until it answers again. */
const DEFAULT_PROBE_INTERVAL_MS = 500;

/**
 * Probes in a row that must find Redis serving, with no connection reporting it away in between, before
 * it is called back: right after a Cluster failover one connection may already serve while another still
 * meets the old slot map, and calling Redis back at the first good probe would log the outage twice.
 */
const DEFAULT_SETTLED_PROBES = 3;

/**
 * How long after Redis is called back a report of it away must be confirmed by a failing probe before
 * it is called another outage. Connections reset on purpose then: BullMQ abandons a blocking command
 * that outlived its deadline (at most its 10 s block and 1 s more) by dropping the connection, whose
 * commands then fail with "Connection is closed" while Redis serves.
 */
const DEFAULT_SETTLING_MS = 15_000;

/**
 * Errors that say Redis cannot serve now (connection lost or refused, a failover under way, a node that
 * became a replica, a cluster without a primary for a slot), rather than that a command was wrong.
 */
const REDIS_UNAVAILABLE =
  /Connection is closed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|^READONLY|^CLUSTERDOWN|^TRYAGAIN|^LOADING|^MASTERDOWN|All sentinels are unreachable|Too many Cluster redirections|Failed to refresh slots cache|None of startup nodes is available|Cluster isn't ready|enableOfflineQueue options is false|Stream isn't writeable|Reached the max retries per request limit|Command timed out|Redis did not accept/;

export function isRedisUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth += 1) {
    if (current instanceof Error && REDIS_UNAVAILABLE.test(current.message)) return true;
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && REDIS_UNAVAILABLE.test(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** The two warnings of an outage, as they appear in the log's `msg`. */
export const REDIS_LOST_MESSAGE = 'redis unavailable: jobs wait and the outbox keeps their events until it is back';
export const REDIS_BACK_MESSAGE = 'redis available again';

export interface RedisAvailabilityOptions {
  logger: Logger;
  /** Succeeds once Redis serves the queue again (a write to its slot). */
  probe: () => Promise<void>;
  /** Whether every connection of the process is connected again (none still between two attempts). */
  allConnected: () => boolean;
  /** The mode and the node the process talks to, for the two warnings. */
  describe: () => Record<string, string | undefined>;
  probeIntervalMs?: number;
  /** DEFAULT_SETTLED_PROBES unless set. */
  settledProbes?: number;
  /** DEFAULT_SETTLING_MS unless set. */
  settlingMs?: number;
}

/**
 * An outage of Redis as a process sees it, logged as two warnings: one when a connection first reports
 * Redis lost, and one when probes have found it serving, with every connection back, several times in a
 * row without a new report of it away (DEFAULT_SETTLED_PROBES), with how long it was away. For a while
 * after that (DEFAULT_SETTLING_MS), a report of Redis away is an outage only if a probe fails too. Each
 * connection reports its errors on every reconnection attempt, and BullMQ's queues and workers theirs;
 * within an outage they are logged at debug level only, so a failover reads as two lines.
 */
export class RedisAvailability {
  private readonly options: RedisAvailabilityOptions;
  private lostAt: number | undefined;
  /** Good probes since the last report of Redis away, during an outage. */
  private goodProbes = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** When Redis was last called back, for the settling time after it. */
  private backAt: number | undefined;
  private confirming = false;

  constructor(options: RedisAvailabilityOptions) {
    this.options = options;
  }

  /** Whether Redis is being waited for now. */
  get lost(): boolean {
    return this.lostAt !== undefined;
  }

  /** A connection lost Redis (or a command said it is away): the first report of an outage warns. */
  reportLost(error: unknown): void {
    if (this.stopped) return;
    // Within an outage, a report only says it is not over yet.
    this.goodProbes = 0;
    if (this.lostAt !== undefined) return;
    if (this.backAt !== undefined && Date.now() - this.backAt < (this.options.settlingMs ?? DEFAULT_SETTLING_MS)) {
      this.confirm(error);
      return;
    }
    this.declareLost(error);
  }

  private declareLost(error: unknown): void {
    this.lostAt = Date.now();
    this.options.logger.warn({ err: error, ...this.options.describe() }, REDIS_LOST_MESSAGE);
    this.schedule();
  }

  /**
   * Connections are being dropped on purpose while Redis serves (a replaced worker's, whose commands in
   * flight fail with "Connection is closed"): for the settling time, as after an outage, a report of
   * Redis away is an outage only if a probe fails too.
   */
  expectResets(): void {
    if (this.lostAt === undefined) this.backAt = Date.now();
  }

  /** Settling after an outage: Redis is away again only if a probe says so too (DEFAULT_SETTLING_MS). */
  private confirm(error: unknown): void {
    if (this.confirming) return;
    this.confirming = true;
    this.options
      .probe()
      .then(
        () => this.options.logger.debug({ err: error }, 'a connection was reset while Redis settled; it serves'),
        () => {
          if (!this.stopped && this.lostAt === undefined) this.declareLost(error);
        },
      )
      .finally(() => {
        this.confirming = false;
      });
  }

  /**
   * Logs an error of a Redis connection, a queue or a worker: one that says Redis is away counts toward
   * the outage (and is logged at debug); any other is a warning of its own.
   */
  report(error: unknown, message: string, fields: Record<string, unknown> = {}): void {
    if (isRedisUnavailable(error)) {
      this.reportLost(error);
      this.options.logger.debug({ err: error, ...fields }, message);
    } else {
      this.options.logger.warn({ err: error, ...fields }, message);
    }
  }

  /** Stops probing (the process is closing); an outage still going on is not reported as over. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tryProbe(), this.options.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS);
    // Never what keeps a process alive.
    this.timer.unref();
  }

  private async tryProbe(): Promise<void> {
    const lostAt = this.lostAt;
    if (lostAt === undefined || this.stopped) return;
    let back: boolean;
    try {
      await this.options.probe();
      back = this.options.allConnected();
    } catch {
      back = false;
    }
    this.goodProbes = back ? this.goodProbes + 1 : 0;
    if (this.goodProbes < (this.options.settledProbes ?? DEFAULT_SETTLED_PROBES)) {
      this.schedule();
      return;
    }
    this.goodProbes = 0;
    this.lostAt = undefined;
    this.timer = undefined;
    this.backAt = Date.now();
    this.options.logger.warn({ durationMs: Date.now() - lostAt, ...this.options.describe() }, REDIS_BACK_MESSAGE);
  }
}
