import Router from '@koa/router';
import { invalidParameter, notFound } from '@runtasks/shared/errors';
import Koa from 'koa';
import { IncomingMessage, ServerResponse } from 'node:http';
import { checkReadiness, Metrics } from '@runtasks/shared/ops';
import { rateLimit } from './ops/rate-limit.ts';
import { countHandling } from './ops/download-yield.ts';
import { serveCli } from './cli-download/route.ts';
import { buildOpenApiDocument } from './openapi/document.ts';
import { serveReference } from './openapi/reference-page.ts';
import { pages } from './pages/router.ts';
import { authenticate, authenticateCallback, authenticateTokenOrTask } from './auth/authenticate.ts';
import { authenticateAuditTrail } from './auth/audit-trail-reader.ts';
import { RequestState, type ApiContext, type ApiContextExtras, type ApiDeps, type ApiOps, type ApiState } from './context.ts';
import { jsonBodyParser, requireJsonContentType } from './http/body.ts';
import { compression } from './http/compression.ts';
import { abortedByClient, errorHandler } from './http/errors.ts';
import { SECURITY_HEADERS, securityHeaders } from './http/security-headers.ts';
import { API_PREFIX } from './http/jsonapi.ts';
import { OutageLog } from './http/outage-log.ts';
import { AnswerLog } from './http/answer-log.ts';
import { earlyRefusal } from './http/early-refusal.ts';
import type { RouteDef } from './routes/define.ts';
import { ROUTES } from './routes/index.ts';

/** PostgreSQL refuses NUL in text (a protocol violation, once a 503): a path or query value with one names nothing. */
async function rejectNul(ctx: ApiContext, next: Koa.Next): Promise<void> {
  if (Object.values(ctx.params).some((value) => value.includes('\u0000'))) throw notFound();
  for (const [name, value] of Object.entries(ctx.query)) {
    if ([value ?? []].flat().some((item) => item.includes('\u0000')))
      throw invalidParameter(name, `${name} must not contain NUL characters.`);
  }
  await next();
}

/** The first segment after the API prefix, as the routers compare paths: case-insensitively. */
const FIRST_SEGMENT = new RegExp(`^${API_PREFIX}/([^/]+)`, 'i');

type RouterMiddleware = ReturnType<Router<ApiState, ApiContextExtras>['routes']>;

interface Routing {
  middleware: RouterMiddleware;
  /** The template of the route at this method and path whose first step is `authenticate`, else undefined. */
  tokenRouteAt(method: string, path: string): string | undefined;
}

/**
 * The routes as one router per first path segment (`runs`, `task-results`, …), each with its own
 * `allowedMethods`, behind a lookup of the segment: a router tests its patterns one by one, so a request
 * meets only those under its segment (docs/design.md, "Smaller choices"). Every route's path starts with
 * a fixed segment, so the one router that can match a path is the one asked; a segment no route has
 * falls through to the 404.
 */
function buildRouters(routes: readonly RouteDef[], ops: ApiOps): Routing {
  // Authentication runs before the input is looked at: a 401 never depends on the body, the query or
  // the ids in the path (nor is an unauthenticated body parsed).
  const AUTH = {
    public: [],
    callback: [authenticateCallback],
    token: [authenticate],
    'token-or-task': [authenticateTokenOrTask],
    'audit-trail': [authenticateAuditTrail],
  } as const;
  // Only what a route needs is in its chain: each middleware costs every request a dispatch. A GET's
  // body is never read (no defined meaning, RFC 9110 §9.3.1; the parser skips GETs anyway), so nor is
  // its Content-Type checked.
  const limit = ops.rateLimiter ? [rateLimit(ops.rateLimiter)] : [];
  const routers = new Map<string, Router<ApiState, ApiContextExtras>>();
  for (const route of routes) {
    const segment = /^\/([^/:]+)/.exec(route.path)?.[1]?.toLowerCase();
    if (segment === undefined) throw new Error(`route ${route.method} ${route.path} does not start with a fixed segment`);
    const router = routers.get(segment) ?? new Router<ApiState, ApiContextExtras>({ prefix: API_PREFIX });
    routers.set(segment, router);
    const readsJson = route.body !== 'raw' && route.method !== 'GET';
    // A DELETE reads a body only where it declares one (remote state consumers name what to remove).
    const bodyMethod = route.method === 'DELETE' && route.requestSchema ? route.method : undefined;
    const input = readsJson ? [rejectNul, requireJsonContentType, jsonBodyParser(route.bodyLimit, bodyMethod)] : [rejectNul];
    const handler = (ctx: ApiContext) => route.handler(ctx);
    const middleware = [...AUTH[route.auth], ...limit, ...input, handler];
    router.register(route.path, [route.method], middleware as never);
  }
  const bySegment = new Map<string, RouterMiddleware>();
  for (const [segment, router] of routers) {
    const routesOf = router.routes();
    const allowedMethods = router.allowedMethods({ throw: true });
    type AllowedContext = Parameters<typeof allowedMethods>[0];
    // One router's context, which its two middleware typings spell differently.
    bySegment.set(segment, (ctx, next) => routesOf(ctx, () => allowedMethods(ctx as unknown as AllowedContext, next)));
  }
  const segmentOf = (path: string): string | undefined => FIRST_SEGMENT.exec(path)?.[1]?.toLowerCase();
  return {
    middleware: (ctx, next) => {
      const segment = segmentOf(ctx.path);
      const dispatch = segment === undefined ? undefined : bySegment.get(segment);
      return dispatch ? dispatch(ctx, next) : next();
    },
    // As the router would run it: the first layer matching path and method, and its first middleware.
    tokenRouteAt: (method, path) => {
      const segment = segmentOf(path);
      const matched = segment === undefined ? undefined : routers.get(segment)?.match(path, method);
      const first = matched?.route ? matched.pathAndMethod[0] : undefined;
      return first?.stack[0] === authenticate ? String(first.path) : undefined;
    },
  };
}

/** Gives each request its state and id, and times and logs it once it is answered. */
function requestContext(deps: ApiDeps, answers: AnswerLog): Koa.Middleware<ApiState, ApiContextExtras> {
  return async (ctx, next) => {
    ctx.state = new RequestState(deps.orm);
    ctx.state.requestId = answers.requestId(ctx.get('x-request-id'));
    ctx.set('X-Request-Id', ctx.state.requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      const seconds = (performance.now() - started) / 1000;
      answers.answered({ requestId: ctx.state.requestId, method: ctx.method, route, status: ctx.status, address: ctx.ip, seconds });
    }
  };
}

/**
 * The API's Koa app, whose request listener (`callback()`, what the server and the tests are given)
 * answers an address refused by the failure limit before the chain (http/early-refusal.ts).
 */
export class ApiApp extends Koa<ApiState, ApiContextExtras> {
  earlyRefusal: ((req: IncomingMessage, res: ServerResponse) => boolean) | undefined;

  override callback(): ReturnType<Koa['callback']> {
    const handle = super.callback();
    // HTTP/1 only (the API's server): Koa's listener type admits HTTP/2's request and response too.
    const early = (req: unknown, res: unknown): boolean =>
      req instanceof IncomingMessage && res instanceof ServerResponse && this.earlyRefusal?.(req, res) === true;
    return (req, res) => (early(req, res) ? Promise.resolve() : handle(req, res));
  }
}

/** Builds the API as a Koa app without listening, so tests drive it in-process. */
export function buildApp(deps: ApiDeps, routes: readonly RouteDef[] = ROUTES): ApiApp {
  const app = new ApiApp();
  app.context.deps = deps;
  // Behind a proxy (TRUST_PROXY), the client is the address it appended to X-Forwarded-For, its last
  // entry: the ones before it are whatever the client sent.
  app.proxy = deps.config.trustProxy;
  app.maxIpsCount = 1;
  const ops: ApiOps = {
    metrics: deps.ops?.metrics ?? new Metrics(),
    readinessChecks: deps.ops?.readinessChecks ?? {},
    isDraining: deps.ops?.isDraining ?? (() => false),
    rateLimiter: deps.ops?.rateLimiter,
    dashboard: deps.ops?.dashboard,
    principalCache: deps.ops?.principalCache,
    authFailures: deps.ops?.authFailures,
    publishRunCreated: deps.ops?.publishRunCreated,
  };
  const readinessChecks = { postgres: async () => void (await deps.orm.em.fork().execute('select 1')), ...ops.readinessChecks };
  const routing = buildRouters(routes, ops);
  const answers = new AnswerLog(deps.logger, ops.metrics);
  app.earlyRefusal = earlyRefusal(app, {
    deps,
    tokenRouteAt: routing.tokenRouteAt,
    answers,
    alwaysSet: { ...SECURITY_HEADERS, ...(deps.config.httpCompression ? { Vary: 'Accept-Encoding' } : {}) },
  });

  app.use(requestContext(deps, answers));
  // Downloads give way, chunk by chunk, to the requests counted here (download-yield.ts).
  app.use(countHandling());
  // Outside everything that sets a body (errors included), so whatever is sent is compressed alike.
  if (deps.config.httpCompression) app.use(compression());
  app.use(securityHeaders);
  app.use(errorHandler);
  // Probes, metrics, the API description and the CLI's download: no authentication, no JSON:API.
  let openApi: ReturnType<typeof buildOpenApiDocument> | undefined;
  app.use(async (ctx, next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    if (ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
    } else if (ctx.path === '/readyz') {
      const report = await checkReadiness(readinessChecks, ops.isDraining());
      ctx.status = report.ready ? 200 : 503;
      ctx.body = report;
    } else if (ctx.path === '/openapi.json') {
      openApi ??= buildOpenApiDocument(routes, deps.config.publicBaseUrl);
      ctx.body = openApi;
    } else if (await serveReference(ctx, '/openapi.json', deps.config.publicBaseUrl)) {
      return;
    } else if (await serveCli(ctx)) {
      return;
    } else if (ctx.path === '/metrics') {
      ctx.type = ops.metrics.registry.contentType;
      ctx.body = await ops.metrics.registry.metrics();
    } else {
      return next();
    }
  });
  // The run pages for people (/app, /session) answer HTML of their own, errors included.
  app.use(pages(ops.rateLimiter));
  if (ops.dashboard) app.use(ops.dashboard);
  app.use(async (ctx, next) => {
    await next();
    // Nothing matched (and allowedMethods found no other method for the path): a JSON:API 404.
    if (ctx.status === 404 && ctx.body === undefined) throw notFound();
  });
  app.use(routing.middleware);
  const outages = new OutageLog({ logger: deps.logger, probe: readinessChecks.postgres });
  app.on('unavailable', (error: unknown, ctx?: { state?: { requestId?: string } }) => outages.answered503(error, ctx?.state?.requestId));
  app.on('error', (error: unknown, ctx?: { state?: { requestId?: string }; req?: ApiContext['req'] }) => {
    // Koa reports a response whose socket failed too: where the client went away first, that is its doing.
    if (ctx?.req && abortedByClient(ctx.req, error)) deps.logger.debug({ err: error, requestId: ctx.state?.requestId }, 'client went away');
    else deps.logger.error({ err: error, requestId: ctx?.state?.requestId }, 'unhandled error');
  });
  return app;
}
