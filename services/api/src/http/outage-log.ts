import type { Logger } from '@runtasks/shared/logger';

export interface OutageLogOptions {
  logger: Logger;
  /** Succeeds once the backing services serve again (PostgreSQL's `select 1`). */
  probe: () => Promise<void>;
  /** How often the probe is tried while an outage lasts. */
  probeIntervalMs?: number;
}

const DEFAULT_PROBE_INTERVAL_MS = 1_000;

/**
 * Logs an outage of a backing service as two warnings, one when the first request is answered 503 for
 * it and one when a probe finds the service back, with how many requests were answered 503 in between.
 * Each of those requests was answered correctly, so none is an error of its own (each is in the access
 * log, and at debug level here, for whoever needs them one by one).
 */
export class OutageLog {
  private readonly options: OutageLogOptions;
  private current: { startedAt: number; answered503: number } | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: OutageLogOptions) {
    this.options = options;
  }

  /** Whether an outage is being counted now. */
  get ongoing(): boolean {
    return this.current !== undefined;
  }

  /** A request was answered 503 because a backing service could not serve it. */
  answered503(error: unknown, requestId: string | undefined): void {
    if (!this.current) {
      this.current = { startedAt: Date.now(), answered503: 0 };
      this.options.logger.warn({ err: error, requestId }, 'outage started: a backing service is unavailable, requests are answered 503');
      this.scheduleProbe();
    }
    this.current.answered503 += 1;
    this.options.logger.debug({ err: error, requestId }, 'answered 503: a backing service is unavailable');
  }

  /** Stops probing (the process is closing); an outage still counted is not reported as ended. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.current = undefined;
  }

  private scheduleProbe(): void {
    this.timer = setTimeout(() => void this.tryProbe(), this.options.probeIntervalMs ?? DEFAULT_PROBE_INTERVAL_MS);
    // Never what keeps a process alive.
    this.timer.unref();
  }

  private async tryProbe(): Promise<void> {
    const current = this.current;
    if (!current) return;
    try {
      await this.options.probe();
    } catch {
      if (this.current === current) this.scheduleProbe();
      return;
    }
    if (this.current !== current) return;
    this.current = undefined;
    this.timer = undefined;
    this.options.logger.warn(
      { durationMs: Date.now() - current.startedAt, answered503: current.answered503 },
      `outage ended: the backing services serve again; ${current.answered503} requests were answered 503 meanwhile`,
    );
  }
}
