import { performance } from 'node:perf_hooks';

/**
 * Notifications give way to runs (docs/notifications.md, "Delivery"): a run is the gate people wait
 * on, a notification tells them about it, so while this process's run engine is busy a notification
 * job waits for room before it does its work (its statements, its sends), up to a bound. Busy means
 * short of CPU, not merely occupied: half the runs worker's slots or more in progress while the event
 * loop has been working most of the time. Run jobs that wait on slow task servers fill the slots but
 * leave the loop idle, and then a notification goes at once. Under a burst that saturates the machine
 * the runs go first and their notifications follow; below saturation a notification never waits.
 */

/** The longest a notification job waits for the run engine: past it, it goes anyway (never starved). */
export const NOTIFICATION_YIELD_MAX_MS = 10_000;
/** From this share of the last sampling interval spent working, the event loop is short of CPU. */
const LOOP_BUSY = 0.5;
const SAMPLE_MS = 100;

/** A job processor, as the queue workers run them. */
type Work<A extends unknown[], R> = (...args: A) => Promise<R>;

/** The share of the last interval this process's event loop spent working (0 … 1), sampled every SAMPLE_MS. */
export function sampledLoopUtilization(): { utilization: () => number; stop: () => void } {
  let last = performance.eventLoopUtilization();
  let current = 0;
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    current = performance.eventLoopUtilization(now, last).utilization;
    last = now;
  }, SAMPLE_MS);
  timer.unref();
  return { utilization: () => current, stop: () => clearInterval(timer) };
}

export class RunLoad {
  private active = 0;
  private readonly busyAt: number;
  private readonly roomAt: number;
  private readonly utilization: () => number;
  private waiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;

  /**
   * `concurrency`: the runs worker's. The engine is busy with half of it or more in progress (and the
   * loop short of CPU), and a notification held for that waits until a quarter or less is, or the loop
   * has time again: under a burst the count swings around any one line from job to job, and a
   * notification let through at every dip would hardly wait. `utilization`: the event loop's recent
   * working share (sampledLoopUtilization).
   */
  constructor(concurrency: number, utilization: () => number) {
    this.busyAt = Math.max(1, Math.ceil(concurrency / 2));
    this.roomAt = Math.floor(concurrency / 4);
    this.utilization = utilization;
  }

  /** Whether the run engine has half its slots or more in progress and the event loop is short of CPU. */
  get busy(): boolean {
    return this.active >= this.busyAt && this.utilization() >= LOOP_BUSY;
  }

  /** Runs' jobs in progress in this process now. */
  get inProgress(): number {
    return this.active;
  }

  /** The runs worker's processor, each job counted while it is in progress. */
  counting<A extends unknown[], R>(work: Work<A, R>): Work<A, R> {
    return async (...args: A): Promise<R> => {
      this.active += 1;
      try {
        return await work(...args);
      } finally {
        this.active -= 1;
        this.wakeIfRoom();
      }
    };
  }

  /** A notification queue's processor, each job started once the run engine has room (or after `maxWaitMs`). */
  behind<A extends unknown[], R>(work: Work<A, R>, maxWaitMs = NOTIFICATION_YIELD_MAX_MS): Work<A, R> {
    return async (...args: A): Promise<R> => {
      await this.room(maxWaitMs);
      return work(...args);
    };
  }

  /**
   * Resolves at once when the run engine is not busy, else once it has a quarter or less of its slots
   * in progress or the loop has time again, or after `maxWaitMs`, whichever comes first.
   */
  async room(maxWaitMs: number): Promise<void> {
    if (!this.busy) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((waiter) => waiter !== done);
        if (this.waiters.length === 0) this.stopWatching();
        resolve();
      };
      const timer = setTimeout(done, maxWaitMs);
      this.waiters.push(done);
      this.watchLoop();
    });
  }

  private wakeIfRoom(): void {
    if (this.waiters.length === 0) return;
    if (this.active <= this.roomAt || this.utilization() < LOOP_BUSY) for (const waiter of [...this.waiters]) waiter();
  }

  /** While notifications wait, the loop's share is looked at every sampling interval too: it can fall with no job ending. */
  private watchLoop(): void {
    this.timer ??= setInterval(() => this.wakeIfRoom(), SAMPLE_MS).unref();
  }

  private stopWatching(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
