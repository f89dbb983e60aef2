import { ChannelListener, PRINCIPALS_CHANNEL, type Logger } from '@runtasks/shared';
import { PrincipalMemo, type KnownToken } from './principal-memo.ts';

export interface PrincipalCacheOptions {
  databaseUrl: string;
  ttlMs: number;
  logger: Logger;
  maxEntries?: number;
}

const DEFAULT_MAX_ENTRIES = 10_000;

/**
 * Saves the token lookup on most requests, without letting a revocation lag. Triggers on api_tokens
 * and teams NOTIFY on every change that can alter a principal (revocation, expiry, deletion, a team's
 * permissions); every API process LISTENs and forgets everything it knows on each. Only while its LISTEN
 * connection is up does a process remember anything: when the connection goes, it forgets and asks
 * the database on every request until it listens again (notifications sent meanwhile are lost to it).
 * What is left is the notification's own delay after the revoking commit (milliseconds), and `ttlMs`
 * bounds how long an entry lives should a notification never come.
 */
export class PrincipalCache {
  private readonly memo: PrincipalMemo;
  private readonly listener: ChannelListener;

  constructor(options: PrincipalCacheOptions) {
    this.memo = new PrincipalMemo({ ttlMs: options.ttlMs, maxEntries: options.maxEntries ?? DEFAULT_MAX_ENTRIES });
    this.listener = new ChannelListener({
      databaseUrl: options.databaseUrl,
      channel: PRINCIPALS_CHANNEL,
      logger: options.logger,
      name: 'principal cache listener',
      fallback: 'every request looks its token up',
      onNotification: () => this.memo.forgetAll(),
      // What changed while nobody listened was not heard: forget it all (and anything looked up before).
      onListening: () => this.memo.forgetAll(),
      onLost: () => this.memo.forgetAll(),
    });
  }

  /** Resolves after the first attempt to listen; until one succeeds, nothing is remembered. */
  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    this.memo.forgetAll();
    return this.listener.stop();
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  get size(): number {
    return this.memo.size;
  }

  /** Read before the lookup and handed to `remember`. */
  get epoch(): number {
    return this.memo.epoch;
  }

  recall(tokenHash: string): KnownToken | undefined {
    return this.listener.listening ? this.memo.recall(tokenHash) : undefined;
  }

  remember(tokenHash: string, token: KnownToken, epoch: number): void {
    if (this.listener.listening) this.memo.remember(tokenHash, token, epoch);
  }

  /** This process changed tokens or teams: it need not wait for its own notification. */
  forgetAll(): void {
    this.memo.forgetAll();
  }
}
