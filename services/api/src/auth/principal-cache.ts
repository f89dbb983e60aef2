import { ChannelListener, PRINCIPALS_CHANNEL, type Logger } from '@runtasks/shared';
import { PrincipalMemo, type KnownToken } from './principal-memo.ts';

export interface PrincipalCacheOptions {
  databaseUrl: string;
  ttlMs: number;
  logger: Logger;
  /** NOTIFYs `payload` on the principals channel through another connection (the pool): the heartbeat. */
  notify: (payload: string) => Promise<void>;
  maxEntries?: number;
  heartbeatMs?: number;
}

const DEFAULT_MAX_ENTRIES = 10_000;
const DEFAULT_HEARTBEAT_MS = 1_000;
/** Heartbeats missed in a row before the cache stops trusting its connection. */
const MISSED_HEARTBEATS = 3;
/** The heartbeat's payload; any process's heartbeat proves the connection delivers. */
const HEARTBEAT = 'heartbeat';

/**
 * Saves the token lookup on most requests, without letting a revocation lag. Triggers on api_tokens
 * and teams NOTIFY on every change that can alter a principal (revocation, expiry, deletion, a team's
 * permissions); every API process LISTENs and forgets everything it knows on each.
 *
 * It trusts its LISTEN connection only while it hears its heartbeat: a notification it sends through
 * the pool every second. PostgreSQL delivers notifications in commit order, so hearing a heartbeat
 * means every change committed before it was heard too. A connection that is lost, silently dead,
 * or behind a pooler that never delivers (PgBouncer in transaction mode) hears none: within three
 * heartbeats the process stops remembering and asks the database on every request, and when it hears
 * one again it forgets what it knew before the gap. What is left is the notification's own delay
 * after the revoking commit (milliseconds), and `ttlMs` bounds any entry's life besides.
 */
export class PrincipalCache {
  private readonly memo: PrincipalMemo;
  private readonly listener: ChannelListener;
  private readonly options: PrincipalCacheOptions;
  private readonly livenessMs: number;
  /** performance.now() when a heartbeat was last heard on the current connection. */
  private lastHeard: number | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(options: PrincipalCacheOptions) {
    this.options = options;
    this.livenessMs = (options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS) * MISSED_HEARTBEATS;
    this.memo = new PrincipalMemo({ ttlMs: options.ttlMs, maxEntries: options.maxEntries ?? DEFAULT_MAX_ENTRIES });
    this.listener = new ChannelListener({
      databaseUrl: options.databaseUrl,
      channel: PRINCIPALS_CHANNEL,
      logger: options.logger,
      name: 'principal cache listener',
      fallback: 'every request looks its token up',
      onNotification: (payload) => (payload === HEARTBEAT ? this.heard() : this.memo.forgetAll()),
      // A new connection is trusted once a heartbeat comes through it: ask for one at once.
      onListening: () => this.untrust(true),
      onLost: () => this.untrust(false),
    });
  }

  /** Resolves after the first attempt to listen; until a heartbeat is heard, nothing is remembered. */
  async start(): Promise<void> {
    this.timer = setInterval(() => this.beat(), this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS);
    this.timer.unref();
    await this.listener.start();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.untrust(false);
    await this.listener.stop();
  }

  /** Whether it remembers and answers from memory now: listening, and its heartbeat recently heard. */
  get trusted(): boolean {
    return this.listener.listening && this.lastHeard !== undefined && performance.now() - this.lastHeard <= this.livenessMs;
  }

  get size(): number {
    return this.memo.size;
  }

  /** Read before the lookup and handed to `remember`. */
  get epoch(): number {
    return this.memo.epoch;
  }

  recall(key: string): KnownToken | undefined {
    return this.trusted ? this.memo.recall(key) : undefined;
  }

  remember(key: string, token: KnownToken, epoch: number): void {
    if (this.trusted) this.memo.remember(key, token, epoch);
  }

  /** This process changed tokens or teams: it need not wait for its own notification. */
  forgetAll(): void {
    this.memo.forgetAll();
  }

  private heard(): void {
    const now = performance.now();
    // After a gap, changes may have gone unheard: nothing known before it is kept.
    if (this.lastHeard === undefined || now - this.lastHeard > this.livenessMs) this.memo.forgetAll();
    this.lastHeard = now;
  }

  private untrust(beatNow: boolean): void {
    this.lastHeard = undefined;
    this.memo.forgetAll();
    if (beatNow) this.beat();
  }

  private beat(): void {
    if (!this.listener.listening) return;
    // A failed heartbeat (the database away) is a heartbeat not heard: the cache stops trusting itself.
    this.options.notify(HEARTBEAT).catch(() => undefined);
  }
}
