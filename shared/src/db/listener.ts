import pg from 'pg';
import type { Logger } from '../logger.ts';
import { connectionName } from './connection-name.ts';

export interface ChannelListenerOptions {
  databaseUrl: string;
  channel: string;
  logger: Logger;
  /** Names the listener in log lines ("outbox listener connection lost; …"). */
  name: string;
  /** What the owner falls back on while nobody listens, for the log lines ("polling continues"). */
  fallback: string;
  /** With the notification's payload ('' when none was given). */
  onNotification: (payload: string) => void;
  /** Every time LISTEN took effect: anything notified while nobody listened was missed. */
  onListening?: () => void;
  /** Every time the connection went away or could not be made. */
  onLost?: () => void;
}

/** A lost connection is retried after 0.5 s, doubling up to 15 s. */
const RETRY_BASE_MS = 500;
const RETRY_MAX_MS = 15_000;

/**
 * One connection LISTENing on one channel, made again whenever PostgreSQL drops it (a restart, a
 * killed backend). Notifications only arrive while `listening`; the owner decides what a gap means.
 */
export class ChannelListener {
  private readonly options: ChannelListenerOptions;
  private client: pg.Client | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = false;
  /** The attempt under way, which `stop` waits for so that no connection outlives it. */
  private connecting: Promise<void> | undefined;

  constructor(options: ChannelListenerOptions) {
    if (!/^[a-z_][a-z0-9_]*$/.test(options.channel)) throw new Error(`not a plain channel name: ${options.channel}`);
    this.options = options;
  }

  get listening(): boolean {
    return this.client !== undefined;
  }

  /** Resolves after the first attempt, whether or not it succeeded (it is retried). */
  async start(): Promise<void> {
    await this.attempt();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    // An attempt under way ends its own connection once it sees `stopped`.
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private attempt(): Promise<void> {
    this.connecting = this.connect()
      .catch((error: unknown) => this.options.logger.warn({ err: error }, `${this.options.name} could not be set up`))
      .finally(() => {
        this.connecting = undefined;
      });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const { logger, name, fallback } = this.options;
    // keepAlive: a peer that vanished without closing the connection is noticed, not listened to for ever.
    const client = new pg.Client({
      connectionString: this.options.databaseUrl,
      application_name: connectionName(this.options.databaseUrl),
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    let lost = false;
    const onLost = (error: Error | undefined, message: string): void => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => undefined);
      if (this.stopped) return;
      // The message stays the same from one loss to the next; when it listens again is a field.
      logger.warn({ err: error, retryInMs: this.scheduleRetry() }, `${name} ${message}; ${fallback}`);
      this.options.onLost?.();
    };
    client.on('error', (error) => onLost(error, 'connection lost'));
    client.on('end', () => onLost(undefined, 'connection lost'));
    client.on('notification', (message) => {
      if (message.channel === this.options.channel) this.options.onNotification(message.payload ?? '');
    });
    try {
      await client.connect();
      await client.query(`listen ${this.options.channel}`);
    } catch (error) {
      onLost(error as Error, 'unavailable');
      return;
    }
    if (lost) return;
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.failures = 0;
    this.options.onListening?.();
  }

  /** The delay of the next attempt, or undefined when one is already scheduled (or it stopped). */
  private scheduleRetry(): number | undefined {
    if (this.stopped || this.retryTimer) return undefined;
    this.failures += 1;
    const delayMs = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.min(this.failures - 1, 6));
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.attempt();
    }, delayMs);
    return delayMs;
  }
}
