import { ApiError } from '@runtasks/shared/errors';
import type { RedisClient } from '@runtasks/shared/queue';
import type { Next } from 'koa';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { ApiContext } from '../context.ts';

/**
 * Per-principal limits shared by every API process (Redis), HCP's 30 requests/s by default. When
 * Redis is unavailable an in-memory limiter per process takes over (fail open, but still bounded).
 */
export function createRateLimiter(redis: RedisClient, prefix: string, perSecond: number): RateLimiterAbstract {
  return new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${prefix}:ratelimit`,
    points: perSecond,
    duration: 1,
    insuranceLimiter: new RateLimiterMemory({ points: perSecond, duration: 1 }),
  });
}

/**
 * Who is limited: the token, the task result (callbacks have their own budget), else the address.
 * The run pages' sign-in and the CSP report endpoint are served outside the API router, where Koa
 * sets no `params` at all: those count against the address.
 */
function keyOf(ctx: ApiContext): string {
  if (ctx.state.principal) return `token:${ctx.state.principal.tokenId}`;
  if (ctx.state.taskAccess) return `task:${ctx.state.taskAccess.resultId}`;
  const params: Partial<Record<string, string>> | undefined = ctx.params;
  const resultId = params?.['task_result_id'];
  if (resultId) return `callback:${resultId}`;
  return `ip:${ctx.ip}`;
}

/**
 * The budget's headers, as HCP sends them: the limit, what is left of it, and the seconds until it is
 * whole again, always a plain decimal: go-tfe waits that long after a 429 and stops the whole program
 * on a value it cannot parse as a float.
 */
function budgetHeaders(limiter: RateLimiterAbstract, state: RateLimiterRes): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(limiter.points),
    'X-RateLimit-Remaining': String(Math.max(0, state.remainingPoints)),
    'X-RateLimit-Reset': (Math.max(0, state.msBeforeNext) / 1000).toFixed(3),
  };
}

/** Without a limiter (rate limiting off) the app leaves this middleware out of every route. */
export function rateLimit(limiter: RateLimiterAbstract) {
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    let state: RateLimiterRes;
    try {
      state = await limiter.consume(keyOf(ctx));
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw rejection;
      const retryAfter = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      throw new ApiError(
        429,
        'too many requests',
        `Rate limit of ${limiter.points} requests per second exceeded; retry after ${retryAfter} s.`,
        undefined,
        { 'Retry-After': String(retryAfter), ...budgetHeaders(limiter, rejection) },
      );
    }
    ctx.set(budgetHeaders(limiter, state));
    await next();
  };
}
