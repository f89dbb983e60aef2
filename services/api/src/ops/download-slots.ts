import { ApiError } from '@runtasks/shared/errors';
import type { Config } from '@runtasks/shared/config';
import { Readable } from 'node:stream';
import type { ApiContext } from '../context.ts';
import { stopCounting, yieldingBody } from './download-yield.ts';

/**
 * Bounds the archive and plan JSON downloads one API process serves at once (docs/limits-and-security.md,
 * "Concurrent downloads"): DOWNLOADS_PER_TOKEN per token (a task result's access token counts as its own
 * token; past it a 429 with Retry-After at once) and DOWNLOADS_TOTAL in all. Past the total a download
 * waits its turn, in order, for up to DOWNLOADS_WAIT_SECONDS before its 429: the post-plan tasks of many
 * runs read their plans at once, and a task server that is refused fails its check, so they queue rather
 * than fail, while the bound still keeps the connections every other organization needs. A waiting
 * download holds no memory and no connection. A slot is held until the response has ended or the client
 * has gone away, and then handed to the first one waiting.
 */

interface Slots {
  total: number;
  byToken: Map<string, number>;
  /** Downloads waiting for a slot in all, first come first served: each is told whether it got one. */
  waiting: ((granted: boolean) => void)[];
}

/** Waits for a slot in all (handed over by a release), or gives up after `ms` or when the client goes away. */
function waitForSlot(slots: Slots, ms: number, ctx: ApiContext): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(false);
  return new Promise((resolve) => {
    const settle = (granted: boolean): void => {
      clearTimeout(timer);
      ctx.res.off('close', withdraw);
      resolve(granted);
    };
    const withdraw = (): void => {
      const index = slots.waiting.indexOf(settle);
      if (index >= 0) slots.waiting.splice(index, 1);
      settle(false);
    };
    const timer = setTimeout(withdraw, ms);
    // Nothing has been sent while it waits: the response closes only when the client has gone away.
    ctx.res.once('close', withdraw);
    slots.waiting.push(settle);
  });
}

/** Per API (tests start several in one process), found by its configuration. */
const slotsOf = new WeakMap<Config, Slots>();

const RETRY_AFTER_SECONDS = 1;

function tokenOf(ctx: ApiContext): string {
  const access = ctx.state.taskAccess;
  return access ? `result:${access.resultId}` : `token:${ctx.state.principal.tokenId}`;
}

const busy = (detail: string): ApiError =>
  new ApiError(429, 'too many requests', `${detail}; retry after ${RETRY_AFTER_SECONDS} s.`, undefined, {
    'Retry-After': String(RETRY_AFTER_SECONDS),
  });

/** `handler`, run only while a download slot is free for its token and in all. */
export function boundedDownload(handler: (ctx: ApiContext) => Promise<void>): (ctx: ApiContext) => Promise<void> {
  return async (ctx) => {
    stopCounting(ctx);
    const { downloadsPerToken, downloadsTotal, downloadsWaitMs } = ctx.deps.config;
    let found = slotsOf.get(ctx.deps.config);
    if (!found) slotsOf.set(ctx.deps.config, (found = { total: 0, byToken: new Map(), waiting: [] }));
    const slots = found;
    const token = tokenOf(ctx);
    const held = slots.byToken.get(token) ?? 0;
    if (held >= downloadsPerToken) throw busy(`This token already has ${held} downloads under way, the most DOWNLOADS_PER_TOKEN allows`);
    // The token's slot is taken while it waits, so one token cannot fill the queue either.
    slots.byToken.set(token, held + 1);
    const giveBackTokenSlot = (): void => {
      const left = (slots.byToken.get(token) ?? 1) - 1;
      if (left === 0) slots.byToken.delete(token);
      else slots.byToken.set(token, left);
    };
    if (slots.total < downloadsTotal) slots.total += 1;
    else if (!(await waitForSlot(slots, downloadsWaitMs, ctx))) {
      giveBackTokenSlot();
      throw busy(`The service is serving ${slots.total} downloads, the most DOWNLOADS_TOTAL allows`);
    }
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      giveBackTokenSlot();
      const next = slots.waiting.shift();
      // Handed over: the count in all stays as it is.
      if (next) next(true);
      else slots.total -= 1;
    };
    // 'close': the response was sent in full, or the connection went away before it was (maybe while
    // this download waited, and then it will not close again).
    ctx.res.once('close', release);
    if (ctx.res.closed) release();
    try {
      await handler(ctx);
      if (ctx.body instanceof Readable) {
        // Koa drops Content-Length when a stream replaces another: the length is the same bytes'.
        const length = ctx.response.get('Content-Length');
        ctx.body = yieldingBody(ctx.deps.config, ctx.body);
        if (length !== '') ctx.set('Content-Length', length);
      }
    } catch (error) {
      release();
      throw error;
    }
  };
}

/** The downloads under way (for tests and the dashboard): in all, and of one token key. */
export function downloadsUnderWay(config: Config): number {
  return slotsOf.get(config)?.total ?? 0;
}

/** The downloads waiting for a slot in all (for tests). */
export function downloadsWaiting(config: Config): number {
  return slotsOf.get(config)?.waiting.length ?? 0;
}
