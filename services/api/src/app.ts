import Router from '@koa/router';
import { invalidParameter, notFound } from '@runtasks/shared';
import Koa from 'koa';
import { randomUUID } from 'node:crypto';
import { checkReadiness, Metrics } from '@runtasks/shared';
import { rateLimit } from './ops/rate-limit.ts';
import { buildOpenApiDocument } from './openapi/document.ts';
import { docsPage } from './openapi/docs-page.ts';
import { authenticate, authenticateCallback, authenticateTokenOrTask } from './auth/authenticate.ts';
import { RequestState, type ApiContext, type ApiContextExtras, type ApiDeps, type ApiOps, type ApiState } from './context.ts';
import { jsonBodyParser, requireJsonContentType } from './http/body.ts';
import { errorHandler } from './http/errors.ts';
import { API_PREFIX } from './http/jsonapi.ts';
import type { RouteDef } from './routes/define.ts';
import { ROUTES } from './routes/index.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** PostgreSQL refuses NUL in text (a protocol violation, once a 503): a path or query value with one names nothing. */
async function rejectNul(ctx: ApiContext, next: Koa.Next): Promise<void> {
  if (Object.values(ctx.params).some((value) => value.includes('\u0000'))) throw notFound();
  for (const [name, value] of Object.entries(ctx.query)) {
    if ([value ?? []].flat().some((item) => item.includes('\u0000')))
      throw invalidParameter(name, `${name} must not contain NUL characters.`);
  }
  await next();
}

function buildRouter(routes: readonly RouteDef[], ops: ApiOps): Router<ApiState, ApiContextExtras> {
  const router = new Router<ApiState, ApiContextExtras>({ prefix: API_PREFIX });
  // Authentication runs before the input is looked at: a 401 never depends on the body, the query or
  // the ids in the path (nor is an unauthenticated body parsed).
  const AUTH = { public: [], callback: [authenticateCallback], token: [authenticate], 'token-or-task': [authenticateTokenOrTask] } as const;
  // Only what a route needs is in its chain: each middleware costs every request a dispatch. A GET's
  // body is never read (no defined meaning, RFC 9110 §9.3.1; the parser skips GETs anyway), so nor is
  // its Content-Type checked.
  const limit = ops.rateLimiter ? [rateLimit(ops.rateLimiter)] : [];
  for (const route of routes) {
    const readsJson = route.body !== 'raw' && route.method !== 'GET';
    const input = readsJson ? [rejectNul, requireJsonContentType, jsonBodyParser(route.bodyLimit)] : [rejectNul];
    const handler = (ctx: ApiContext) => route.handler(ctx);
    const middleware = [...AUTH[route.auth], ...limit, ...input, handler];
    router.register(route.path, [route.method], middleware as never);
  }
  return router;
}

/** Builds the API as a Koa app without listening, so tests drive it in-process. */
export function buildApp(deps: ApiDeps, routes: readonly RouteDef[] = ROUTES): Koa<ApiState, ApiContextExtras> {
  const app = new Koa<ApiState, ApiContextExtras>();
  app.context.deps = deps;
  app.proxy = false;
  const ops: ApiOps = {
    metrics: deps.ops?.metrics ?? new Metrics(),
    readinessChecks: deps.ops?.readinessChecks ?? {},
    isDraining: deps.ops?.isDraining ?? (() => false),
    rateLimiter: deps.ops?.rateLimiter,
    dashboard: deps.ops?.dashboard,
    principalCache: deps.ops?.principalCache,
  };
  const readinessChecks = { postgres: async () => void (await deps.orm.em.fork().execute('select 1')), ...ops.readinessChecks };
  const router = buildRouter(routes, ops);

  app.use(async (ctx, next) => {
    ctx.state = new RequestState(deps.orm);
    const incoming = ctx.get('x-request-id');
    ctx.state.requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      const seconds = (performance.now() - started) / 1000;
      // The route template, not the path: paths can carry capabilities (upload URLs) and ids explode labels.
      const route = (ctx as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      ops.metrics.httpDuration.observe({ method: ctx.method, route, status: String(ctx.status) }, seconds);
      // Checked first: at the production level the line is dropped, and so need not be built.
      if (deps.logger.isLevelEnabled('info')) {
        deps.logger.info(
          { requestId: ctx.state.requestId, method: ctx.method, route, status: ctx.status, ms: Math.round(seconds * 1000) },
          'request',
        );
      }
    }
  });
  app.use(errorHandler);
  // Probes, metrics and the API description: no authentication, no JSON:API.
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
    } else if (ctx.path === '/docs') {
      ctx.type = 'text/html';
      ctx.body = docsPage('/openapi.json');
    } else if (ctx.path === '/metrics') {
      ctx.type = ops.metrics.registry.contentType;
      ctx.body = await ops.metrics.registry.metrics();
    } else {
      return next();
    }
  });
  if (ops.dashboard) app.use(ops.dashboard);
  app.use(async (ctx, next) => {
    await next();
    // Nothing matched (and allowedMethods found no other method for the path): a JSON:API 404.
    if (ctx.status === 404 && ctx.body === undefined) throw notFound();
  });
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  app.on('error', (error: unknown, ctx?: { state?: { requestId?: string } }) => {
    deps.logger.error({ err: error, requestId: ctx?.state?.requestId }, 'unhandled error');
  });
  return app;
}
