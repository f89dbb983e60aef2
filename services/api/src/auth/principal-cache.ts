import { type Logger } from '@runtasks/shared/logger';
import { ChannelListener, TOKEN_CREATED } from '@runtasks/shared/db';
import { PRINCIPALS_CHANNEL } from '@runtasks/shared/queue';
import { randomBytes } from 'node:crypto';
import { ActiveTokens, type ActiveTokenRow } from './active-tokens.ts';
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
  /** The active tokens' keyed hashes and expiries, at most `limit` rows: with it, the process holds them (ActiveTokens). */
  loadActiveTokens?: (limit: number) => Promise<ActiveTokenRow[]>;
  /** Active tokens held at most (beyond that, the set is not used). */
  maxActiveTokens?: number;
}

const DEFAULT_MAX_ENTRIES = 10_000;
const DEFAULT_MAX_REFUSED = 10_000;
const DEFAULT_HEARTBEAT_MS = 1_000;
/** Heartbeats missed in a row before the cache stops trusting its connection. */
const MISSED_HEARTBEATS = 3;
/** The heartbeat's payload; any process's heartbeat proves the connection delivers. */
const HEARTBEAT = 'heartbeat';
/** Active tokens held at most by default: about 58 MiB of heap at this size (docs/outages.md). */
const DEFAULT_MAX_ACTIVE_TOKENS = 1_000_000;

interface BeatWaiter {
  promise: Promise<boolean>;
  resolve: (heard: boolean) => void;
  timer: NodeJS.Timeout;
}

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
 *
 * With `loadActiveTokens`, it also holds the keyed hashes of every active token (ActiveTokens), reloaded
 * on each of those notifications. A token it holds skips the per-address failure limit (a valid token is
 * never refused because its address sent bad ones); one it does not hold is refused without a lookup once
 * it is proven unknown: a heartbeat of this process's own, sent after the request arrived, has come back
 * (so every token committed before the request was notified before it) and the set loaded since. Its own
 * heartbeats carry a sequence number for that (`heartbeat:<process>:<n>`).
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
  private readonly activeTokens: ActiveTokens | undefined;
  private stopped = false;
  /** Marks this process's heartbeats, so it knows when one it sent has come back. */
  private readonly beatPrefix = `${HEARTBEAT}:${randomBytes(6).toString('hex')}:`;
  private sentBeats = 0;
  private heardBeats = 0;
  /** Requests waiting for this process's heartbeat of this number to come back. */
  private readonly beatWaiters = new Map<number, BeatWaiter>();

  constructor(options: PrincipalCacheOptions) {
    this.options = options;
    this.livenessMs = (options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS) * MISSED_HEARTBEATS;
    this.memo = new PrincipalMemo({ ttlMs: options.ttlMs, maxEntries: options.maxEntries ?? DEFAULT_MAX_ENTRIES });
    this.refused = new RefusedTokens({ ttlMs: options.ttlMs, maxEntries: options.maxRefused ?? DEFAULT_MAX_REFUSED });
    const load = options.loadActiveTokens;
    this.activeTokens =
      load &&
      new ActiveTokens({
        load,
        maxEntries: options.maxActiveTokens ?? DEFAULT_MAX_ACTIVE_TOKENS,
        onLoadError: (error) => options.logger.warn({ err: error }, 'active tokens could not be loaded; unknown tokens are looked up'),
      });
    this.listener = new ChannelListener({
      databaseUrl: options.databaseUrl,
      channel: PRINCIPALS_CHANNEL,
      logger: options.logger,
      name: 'principal cache listener',
      fallback: 'every request looks its token up',
      onNotification: (payload) => {
        if (payload === HEARTBEAT || payload.startsWith(`${HEARTBEAT}:`)) this.heard(payload);
        // A new token changes no principal, but may be one refused a moment ago.
        else if (payload === TOKEN_CREATED) {
          this.refused.forgetAll();
          void this.activeTokens?.changed();
        } else this.forgetAll();
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
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.untrust(false);
    await this.listener.stop();
  }

  /** Active tokens held (0 without the set). */
  get activeTokenCount(): number {
    return this.activeTokens?.size ?? 0;
  }

  /** Whether the token with this keyed hash is one of the active ones as last loaded (then no per-address limit applies to it). */
  isActive(tokenHash: string): boolean {
    return this.trusted && this.activeTokens?.verdict(tokenHash) === 'active';
  }

  /**
   * Whether no active token has this keyed hash, proven without the database: waits for a heartbeat of
   * this process's, sent after the call, to come back and for the set to be loaded after it. False
   * (look it up) whenever that cannot be told: no set, not trusted, a heartbeat missed, a load failed.
   */
  async provenUnknown(tokenHash: string): Promise<boolean> {
    const active = this.activeTokens;
    if (!active || !this.trusted || active.verdict(tokenHash) === 'active') return false;
    if (!(await this.ownBeatAfterNow())) return false;
    await active.settled();
    return this.trusted && active.verdict(tokenHash) === 'unknown';
  }

  /** Resolves true once a heartbeat this process sends after now has come back; false when none does in time. */
  private ownBeatAfterNow(): Promise<boolean> {
    const seq = this.sentBeats + 1;
    let waiter = this.beatWaiters.get(seq);
    if (!waiter) {
      let resolve: (heard: boolean) => void = () => undefined;
      const promise = new Promise<boolean>((settle) => (resolve = settle));
      const timer = setTimeout(() => this.settleBeats(seq, false), this.livenessMs + (this.options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS));
      timer.unref();
      waiter = { promise, resolve, timer };
      this.beatWaiters.set(seq, waiter);
    }
    return waiter.promise;
  }

  /** Settles the waiters for heartbeats up to `seq` (all of them with `Infinity`). */
  private settleBeats(seq: number, heard: boolean): void {
    for (const [waiting, waiter] of this.beatWaiters) {
      if (waiting > seq) continue;
      clearTimeout(waiter.timer);
      waiter.resolve(heard);
      this.beatWaiters.delete(waiting);
    }
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
    // Reloaded at once; not once stopping (its pool may be closing).
    if (!this.stopped) void this.activeTokens?.changed();
  }

  private heard(payload: string): void {
    const now = performance.now();
    // After a gap, changes may have gone unheard: nothing known before it is kept.
    if (this.lastHeard === undefined || now - this.lastHeard > this.livenessMs) this.forgetAll();
    this.lastHeard = now;
    if (payload.startsWith(this.beatPrefix)) {
      this.heardBeats = Math.max(this.heardBeats, Number(payload.slice(this.beatPrefix.length)) || 0);
      this.settleBeats(this.heardBeats, true);
    }
  }

  private untrust(beatNow: boolean): void {
    this.lastHeard = undefined;
    this.forgetAll();
    this.settleBeats(Number.POSITIVE_INFINITY, false);
    if (beatNow) this.beat();
  }

  private beat(): void {
    if (!this.listener.listening) return;
    this.sentBeats += 1;
    // A failed heartbeat (the database away) is a heartbeat not heard: the cache stops trusting itself.
    this.options.notify(`${this.beatPrefix}${this.sentBeats}`).catch(() => undefined);
  }
}
