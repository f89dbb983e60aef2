import type { Logger } from '@runtasks/shared/logger';
import type { RedisAvailability } from '@runtasks/shared/queue';
import type { Job, Processor, Queue, Worker } from 'bullmq';

/**
 * How long jobs may wait, while a worker has room for them and Redis serves, before its fetch loop is
 * taken for stuck. Never the case of a healthy worker (it takes a waiting job within a blocking
 * command's 10 s at most), and short enough that a run is not held up for long.
 */
export const FETCH_STALL_MS = 60_000;

/** How long a replaced worker is given to close before its connection is dropped under it. */
const RELEASE_AFTER_MS = 10_000;

export interface FetchState {
  now: number;
  /** Since when jobs have been seen waiting, each time, while the worker had room (undefined: not now). */
  waitingSince: number | undefined;
  /** When the worker last started a job (or was made). */
  lastStartAt: number;
  stallMs: number;
}

/** Whether a worker's fetch loop has stopped: jobs waited for `stallMs` while it had room, and it took none. */
export const fetchStalled = (state: FetchState): boolean =>
  state.waitingSince !== undefined && state.now - state.waitingSince >= state.stallMs && state.now - state.lastStartAt >= state.stallMs;

export interface WatchedWorkerOptions<T> {
  queue: Queue<T>;
  processor: Processor<T>;
  concurrency: number;
  /** A new BullMQ worker for the processor, on a connection of its own, its events watched. */
  create: (processor: Processor<T>) => { worker: Worker<T>; retire: () => void; release: () => void };
  availability: RedisAvailability;
  logger: Logger;
  stallMs?: number;
}

/**
 * A BullMQ worker that is replaced when its fetch loop stops. BullMQ leaves the recovery of its blocking
 * connection to ioredis, and after a Redis Cluster failover under load a worker was seen to take no job
 * again while jobs waited and every connection was back (test/faults/redis-failover.faults.test.ts);
 * BullMQ's maintainers advise closing such a worker and making a new one, which this does. The jobs the
 * old one held come back as stalled jobs, as after a crash, and every job is safe to run again.
 */
export class WatchedWorker<T> {
  private readonly options: WatchedWorkerOptions<T>;
  private current: { worker: Worker<T>; retire: () => void; release: () => void };
  private running = 0;
  private lastStartAt = Date.now();
  private waitingSince: number | undefined;
  private readonly timer: NodeJS.Timeout;
  private checking = false;
  private closing = false;

  constructor(options: WatchedWorkerOptions<T>) {
    this.options = options;
    this.current = options.create(this.counted);
    this.timer = setInterval(() => void this.check(), Math.max(100, Math.round(this.stallMs / 4)));
    this.timer.unref();
  }

  get worker(): Worker<T> {
    return this.current.worker;
  }

  private get stallMs(): number {
    return this.options.stallMs ?? FETCH_STALL_MS;
  }

  private readonly counted: Processor<T> = async (job: Job<T>, token?: string, signal?: AbortSignal) => {
    this.running += 1;
    this.lastStartAt = Date.now();
    try {
      return await this.options.processor(job, token, signal);
    } finally {
      this.running -= 1;
    }
  };

  /** One look: jobs ready to take, room to take them, Redis serving; replaced once that has lasted. */
  private async check(): Promise<void> {
    if (this.checking || this.closing) return;
    this.checking = true;
    try {
      const ready = this.options.availability.lost ? 0 : await this.options.queue.getJobCountByTypes('wait', 'prioritized').catch(() => 0);
      const now = Date.now();
      if (ready === 0 || this.running >= this.options.concurrency) {
        this.waitingSince = undefined;
        return;
      }
      this.waitingSince ??= now;
      if (!this.closing && fetchStalled({ now, waitingSince: this.waitingSince, lastStartAt: this.lastStartAt, stallMs: this.stallMs }))
        this.replace(now - this.waitingSince, ready);
    } finally {
      this.checking = false;
    }
  }

  private replace(waitedMs: number, ready: number): void {
    const old = this.current;
    this.options.logger.warn(
      { queue: this.options.queue.name, waitedMs, jobsWaiting: ready },
      'the worker took no job while jobs waited and Redis served: its fetch loop is replaced',
    );
    this.current = this.options.create(this.counted);
    this.lastStartAt = Date.now();
    this.waitingSince = undefined;
    // Its commands fail as it is closed and its connections dropped, on purpose: no outage of Redis. A
    // connection BullMQ made that was not marked with it can still report one: a probe decides.
    this.options.availability.expectResets();
    old.retire();
    old.worker.removeAllListeners('error');
    old.worker.on('error', (error) => this.options.logger.debug({ err: error }, 'an error of a replaced worker'));
    // Not awaited: a stuck worker may never finish closing. Its connection goes either way, at the
    // latest after RELEASE_AFTER_MS.
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      old.release();
    };
    setTimeout(release, RELEASE_AFTER_MS).unref();
    void old.worker
      .close(true)
      .catch(() => undefined)
      .finally(release);
  }

  /** Stops watching and closes the worker (`force`: without waiting for its active jobs). */
  async close(force: boolean): Promise<void> {
    this.closing = true;
    clearInterval(this.timer);
    await this.current.worker.close(force);
  }
}
