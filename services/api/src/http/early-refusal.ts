import type Koa from 'koa';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { bearerToken, failureLimitRefusesForMs } from '../auth/authenticate.ts';
import { failedAuthRefusal } from '../auth/failed-auth-limit.ts';
import type { ApiContextExtras, ApiDeps, ApiState } from '../context.ts';
import type { AnswerLog } from './answer-log.ts';
import { renderError } from './errors.ts';
import { MEDIA_TYPE } from './jsonapi.ts';

export interface EarlyRefusalOptions {
  deps: ApiDeps;
  /** The template of the route at this method and path whose first step is `authenticate`, else undefined. */
  tokenRouteAt(method: string, path: string): string | undefined;
  answers: AnswerLog;
  /** Headers the chain's middleware set on every answer (securityHeaders, compression's Vary). */
  alwaysSet: Readonly<Record<string, string>>;
}

/**
 * The failure limit's 429, answered before the request enters Koa's chain when its address is past its
 * failed authentications and it goes to a token route with a token no active one matches: the same
 * answer (status, headers, body) the chain gives it from `authenticate`, for a fraction of the work. A
 * flood of random tokens from a client's own address (NAT, a proxy without TRUST_PROXY) then takes
 * little of the process's time from that client's valid requests (issue 47, bench/token-flood.ts).
 * Returns true when it answered.
 */
export function earlyRefusal(app: Koa<ApiState, ApiContextExtras>, options: EarlyRefusalOptions) {
  const { deps, answers, alwaysSet } = options;
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined || deps.ops?.authFailures?.mayRefuseAny() !== true) return false;
    const started = performance.now();
    // Koa's own reading of the address (TRUST_PROXY, X-Forwarded-For) and of the path.
    const ctx = app.createContext(req, res);
    const blockedMs = failureLimitRefusesForMs(deps, ctx.ip, token);
    if (blockedMs === 0) return false;
    const route = options.tokenRouteAt(ctx.method, ctx.path);
    if (route === undefined) return false;
    const error = failedAuthRefusal(blockedMs);
    const requestId = answers.requestId(ctx.get('x-request-id'));
    const body = JSON.stringify(renderError(error));
    res.statusCode = error.status;
    res.setHeader('X-Request-Id', requestId);
    for (const [name, value] of Object.entries({ ...alwaysSet, ...error.headers })) res.setHeader(name, value);
    res.setHeader('Content-Type', MEDIA_TYPE);
    res.setHeader('Content-Length', Buffer.byteLength(body));
    res.end(body);
    const seconds = (performance.now() - started) / 1000;
    answers.answered({ requestId, method: ctx.method, route, status: error.status, address: ctx.ip, seconds });
    return true;
  };
}
