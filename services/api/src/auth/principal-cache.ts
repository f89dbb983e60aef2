import { type Logger } from '@runtasks/shared/logger';
import { ChannelListener, TOKEN_CREATED } from '@runtasks/shared/db';
import { PRINCIPALS_CHANNEL } from '@runtasks/shared/queue';
import { PrincipalMemo, type KnownToken } from './principal-memo.ts';
import { RefusedTokens } from './refused-tokens.ts';

export interface PrincipalCacheOptions {
  databaseUrl: string;
  ttlMs: number;
  logger: Logger;
  /** NOTIFYs `payload` on the principals channel through another connection (the pool): the heartbeat. */
  notify: (payload: string) => Promise<void>;
  maxEntries?: number;
  /** Refused tokens remembered at most, apart from the principals. */
  maxRefused?: number;
  heartbeatMs?: number;
}

const DEFAULT_MAX_ENTRIES = 10_000;
const DEFAULT_MAX_REFUSED = 10_000;
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
 *
 * It remembers, under the same rules and apart from the principals, the tokens the database refused, so
 * that one sent again asks nothing. A created token may be one of those: its insert notifies
 * `token-created`, on which every process forgets its refusals (and keeps its principals).
 */
export class PrincipalCache {
  private readonly memo: PrincipalMemo;
  private readonly refused: RefusedTokens;
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
    this.refused = new RefusedTokens({ ttlMs: options.ttlMs, maxEntries: options.maxRefused ?? DEFAULT_MAX_REFUSED });
    this.listener = new ChannelListener({
      databaseUrl: options.databaseUrl,
      channel: PRINCIPALS_CHANNEL,
      logger: options.logger,
      name: 'principal cache listener',
      fallback: 'every request looks its token up',
      onNotification: (payload) => {
        if (payload === HEARTBEAT) this.heard();
        // A new token changes no principal, but may be one refused a moment ago.
        else if (payload === TOKEN_CREATED) this.refused.forgetAll();
        else this.forgetAll();
      },
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

  /** Read before a lookup that may refuse, and handed to `rememberRefused`. */
  get refusedEpoch(): number {
    return this.refused.epoch;
  }

  /** Whether the database refused this key's token a moment ago (unknown, revoked, expired). */
  recallRefused(key: string): boolean {
    return this.trusted && this.refused.has(key);
  }

  rememberRefused(key: string, epoch: number): void {
    if (this.trusted) this.refused.remember(key, epoch);
  }

  /** This process changed or created tokens or teams: it need not wait for its own notification. */
  forgetAll(): void {
    this.memo.forgetAll();
    this.refused.forgetAll();
  }

  private heard(): void {
    const now = performance.now();
    // After a gap, changes may have gone unheard: nothing known before it is kept.
    if (this.lastHeard === undefined || now - this.lastHeard > this.livenessMs) this.forgetAll();
    this.lastHeard = now;
  }

  private untrust(beatNow: boolean): void {
    this.lastHeard = undefined;
    this.forgetAll();
    if (beatNow) this.beat();
  }

  private beat(): void {
    if (!this.listener.listening) return;
    // A failed heartbeat (the database away) is a heartbeat not heard: the cache stops trusting itself.
    this.options.notify(HEARTBEAT).catch(() => undefined);
  }
}
