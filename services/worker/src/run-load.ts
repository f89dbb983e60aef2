/**
 * Notifications give way to runs (docs/notifications.md, "Delivery"): a run is the gate people wait
 * on, a notification tells them about it, so while this process's run engine is busy a notification
 * job waits for room before it does its work (its statements, its sends), up to a bound. Under a burst
 * that saturates the machine the runs go first and their notifications follow; below saturation a
 * notification never waits.
 */

/** The longest a notification job waits for the run engine: past it, it goes anyway (never starved). */
export const NOTIFICATION_YIELD_MAX_MS = 10_000;

/** A job processor, as the queue workers run them. */
type Work<A extends unknown[], R> = (...args: A) => Promise<R>;

export class RunLoad {
  private active = 0;
  private readonly busyAt: number;
  private readonly roomAt: number;
  private waiters: (() => void)[] = [];

  /**
   * `concurrency`: the runs worker's. The engine is busy with half of it or more in progress, and a
   * notification held for that waits until a quarter or less is: under a burst the count swings around
   * any one line from job to job, and a notification let through at every dip would hardly wait.
   */
  constructor(concurrency: number) {
    this.busyAt = Math.max(1, Math.ceil(concurrency / 2));
    this.roomAt = Math.floor(concurrency / 4);
  }

  /** Whether the run engine has half its slots or more in progress. */
  get busy(): boolean {
    return this.active >= this.busyAt;
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
        if (this.active <= this.roomAt) this.wake();
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

  /** Resolves at once when the run engine is not busy, else once it has a quarter or less of its slots in progress or after `maxWaitMs`, whichever comes first. */
  async room(maxWaitMs: number): Promise<void> {
    if (!this.busy) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((waiter) => waiter !== done);
        resolve();
      };
      const timer = setTimeout(done, maxWaitMs);
      this.waiters.push(done);
    });
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
