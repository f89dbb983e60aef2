import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ApiError, methodNotAllowed, notFound } from '@runtasks/shared/errors';
import { isPlausibleToken, type SecretBox } from '@runtasks/shared/security';
import type { Queue } from 'bullmq';
import type { Middleware } from 'koa';
import { principalMemoKey } from '../auth/authenticate.ts';
import type { FailedAuthLimit } from '../auth/failed-auth-limit.ts';
import type { PrincipalCache } from '../auth/principal-cache.ts';

export const DASHBOARD_PATH = '/admin/queues';

/** The site-admin token, as HTTP Basic password (what a browser prompts for) or as a bearer token. */
function credentialOf(header: string | undefined): string | undefined {
  const [scheme, value] = (header ?? '').split(' ');
  if (!value) return undefined;
  if (scheme?.toLowerCase() === 'bearer') return value;
  if (scheme?.toLowerCase() !== 'basic') return undefined;
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  return decoded.slice(decoded.indexOf(':') + 1);
}

/**
 * bull-board behind site-admin authentication, read-only unless configured otherwise. It has no
 * authentication of its own, so this guard is all that stands in front of it.
 */
export function createDashboard(options: {
  queues: Queue[];
  readOnly: boolean;
  orm: MikroORM;
  secrets: SecretBox;
  /** Where refused credentials are remembered for a moment, so that repeating one asks no query. */
  principalCache?: PrincipalCache;
  /** Failed authentications by client address: past the limit, 429 without a query. */
  authFailures?: FailedAuthLimit;
}): Middleware {
  const adapter = new KoaAdapter().setBasePath(DASHBOARD_PATH);
  createBullBoard({
    queues: options.queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: options.readOnly })),
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'Run Tasks queues' } },
  });
  const board = adapter.registerPlugin();
  const isSiteAdmin = async (tokenHash: string): Promise<boolean> => {
    const rows = await options.orm.em
      .fork()
      .execute<{ id: string }[]>(
        `select id from api_tokens where token_hash = ? and kind = 'admin' and revoked_at is null and (expires_at is null or expires_at > now())`,
        [tokenHash],
      );
    return rows.length > 0;
  };
  return async (ctx, next) => {
    if (ctx.path !== DASHBOARD_PATH && !ctx.path.startsWith(`${DASHBOARD_PATH}/`)) return next();
    const credential = credentialOf(ctx.get('authorization') || undefined);
    let allowed = false;
    if (credential && isPlausibleToken(credential)) {
      const tokenHash = options.secrets.hashToken(credential);
      // An active token skips the failure limit (a flood from its address never locks it out); one proven unknown asks nothing.
      const active = options.principalCache?.isActive(tokenHash) === true;
      if (!active) options.authFailures?.check(ctx.ip);
      const refusalKey = principalMemoKey(`dashboard:${credential}`);
      const refusedEpoch = options.principalCache?.refusedEpoch ?? 0;
      allowed =
        (active || !(options.principalCache?.recallRefused(refusalKey) || (await options.principalCache?.provenUnknown(tokenHash)))) &&
        (await isSiteAdmin(tokenHash));
      if (!allowed && !active) {
        options.principalCache?.rememberRefused(refusalKey, refusedEpoch);
        options.authFailures?.recordFailure(ctx.ip);
      }
    }
    if (!allowed) {
      ctx.status = 401;
      ctx.set('WWW-Authenticate', 'Basic realm="Run Tasks dashboard (user: any, password: a site-admin token)", charset="UTF-8"');
      ctx.type = 'application/vnd.api+json';
      ctx.body = { errors: [{ status: '401', title: 'unauthorized' }] };
      return;
    }
    // Read-only refuses every write itself: bull-board leaves some routes of a read-only board answering
    // 200 while doing nothing (pausing or resuming all queues), which reads as done.
    if (options.readOnly && ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      throw new ApiError(
        405,
        'method not allowed',
        'The job dashboard is read-only (DASHBOARD_READ_ONLY=true): it retries, removes, pauses and adds nothing.',
      );
    }
    // Its paths are its own: nothing after it (the API's routers and their 404) is asked, and what its
    // router leaves unanswered gets the API's errors. Asked, the API's 404 was thrown into bull-board,
    // which answers any error with a 500.
    await board(ctx, async () => undefined);
    if (ctx.body === undefined && ctx.status === 404) throw notFound();
    // 501: a method no route anywhere takes (PROPFIND), a 405 as the API answers it.
    if (ctx.body === undefined && (ctx.status === 405 || ctx.status === 501)) throw methodNotAllowed();
  };
}
