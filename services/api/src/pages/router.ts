import { ApiError, notFound } from '@runtasks/shared/errors';
import type { Next } from 'koa';
import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { ApiContext } from '../context.ts';
import { toApiError } from '../http/errors.ts';
import { readRawBody } from '../http/raw-body.ts';
import { rateLimit } from '../ops/rate-limit.ts';
import { serveAsset } from './assets.ts';
import { html } from './html.ts';
import { CSP_REPORT_PATH, sendPage } from './layout.ts';
import { showHome, showOrganization } from './organization.page.ts';
import { showOutcome, showRun, showRunLive, submitOverride, submitRunAction } from './run.handlers.ts';
import { currentSession, type PageSession } from './session.ts';
import { finishSso, SSO_CALLBACK_PATH, SSO_PATH, startSso } from './oidc.page.ts';
import { showSignIn, SIGN_IN_PATH, SIGN_OUT_PATH, submitSignIn, submitSignOut } from './sign-in.page.ts';
import { showWorkspace } from './workspace.page.ts';

type PageHandler = (ctx: ApiContext, session: PageSession) => Promise<void>;

interface PageRoute {
  method: 'GET' | 'POST';
  /** Segments after /app; `:name` takes one segment as that parameter. */
  pattern: string;
  handler: PageHandler;
  /** A fragment a script asks for: 401 without a session rather than a redirect to the sign-in page. */
  fragment?: boolean;
}

const RUN = ':organization_name/workspaces/:workspace_name/runs/:run_id';

/** The pages at HCP Terraform's URLs (what run task payloads link to), each for a signed-in browser. */
const PAGE_ROUTES: readonly PageRoute[] = [
  { method: 'GET', pattern: '', handler: showHome },
  { method: 'GET', pattern: ':organization_name', handler: showOrganization },
  { method: 'GET', pattern: ':organization_name/workspaces/:workspace_name', handler: showWorkspace },
  { method: 'GET', pattern: RUN, handler: showRun },
  { method: 'GET', pattern: `${RUN}/live`, handler: showRunLive, fragment: true },
  { method: 'GET', pattern: `${RUN}/outcomes/:outcome_id`, handler: showOutcome },
  { method: 'POST', pattern: `${RUN}/override`, handler: submitOverride },
  { method: 'POST', pattern: `${RUN}/actions`, handler: submitRunAction },
];

/** The route and its parameters for a path under /app, or nothing (a malformed escape or a NUL names nothing). */
function match(method: string, segments: readonly string[]): { route: PageRoute; params: Record<string, string> } | undefined {
  for (const route of PAGE_ROUTES) {
    const parts = route.pattern === '' ? [] : route.pattern.split('/');
    if ((route.method !== method && !(route.method === 'GET' && method === 'HEAD')) || parts.length !== segments.length) continue;
    const params: Record<string, string> = {};
    const matches = parts.every((part, index) => {
      const segment = segments[index] ?? '';
      if (!part.startsWith(':')) return part === segment;
      params[part.slice(1)] = segment;
      return segment !== '' && !segment.includes('\u0000');
    });
    if (matches) return { route, params };
  }
  return undefined;
}

function decodeSegments(path: string): string[] | undefined {
  try {
    return path === '' ? [] : path.split('/').map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

/** An error as a page: 404 says the same whatever was missing or hidden, so a foreign run looks exactly like none. */
function sendErrorPage(ctx: ApiContext, error: ApiError, session: PageSession | undefined): void {
  for (const [name, value] of Object.entries(error.headers)) ctx.set(name, value);
  const detail =
    error.status === 404
      ? 'There is no such page, or you may not see it.'
      : error.status >= 500
        ? `Something went wrong on our side (request ${ctx.state.requestId}). Try again shortly.`
        : (error.detail ?? error.title);
  sendPage(ctx, {
    status: error.status,
    title: error.status === 404 ? 'Not found' : error.title,
    session,
    stableToken: error.status === 404,
    body: html`<h1>${error.status === 404 ? 'Not found' : error.title}</h1>
      <p class="notice error" role="alert">${detail}</p>
      <p><a href="/app">Back to the start</a></p>`,
  });
}

type Limit = (ctx: ApiContext, next: Next) => Promise<void>;

async function servePage(ctx: ApiContext, limit: Limit | undefined): Promise<void> {
  const segments = decodeSegments(ctx.path.replace(/^\/app\/?/, '').replace(/\/$/, ''));
  const found = segments && match(ctx.method, segments);
  let session: PageSession | undefined;
  try {
    session = await currentSession(ctx);
    if (!session) {
      if (found?.route.fragment) throw new ApiError(401, 'unauthorized', 'Sign in again.');
      ctx.status = 303;
      return ctx.redirect(ctx.method === 'GET' && /^[A-Za-z0-9/_-]*$/.test(ctx.path) ? `${SIGN_IN_PATH}?next=${ctx.path}` : SIGN_IN_PATH);
    }
    if (!found) throw notFound();
    // The metrics and the request log name the route's pattern, never the names and ids in the path.
    (ctx as { _matchedRoute?: string })._matchedRoute = `/app/${found.route.pattern}`.replace(/\/$/, '');
    ctx.params = found.params;
    ctx.state.principal = session.principal;
    const signedIn = session;
    const handle = (): Promise<void> => found.route.handler(ctx, signedIn);
    await (limit ? limit(ctx, handle) : handle());
  } catch (thrown) {
    const error = toApiError(thrown);
    if (error.status >= 500) ctx.app.emit('error', thrown, ctx);
    sendErrorPage(ctx, error, session);
  }
}

/** A browser's report of something our policy blocked: logged (it means an injection was tried, or a bug). */
async function receiveCspReport(ctx: ApiContext): Promise<void> {
  const body = await readRawBody(ctx.req, 16 * 1024).catch(() => Buffer.alloc(0));
  let report: Record<string, unknown> = {};
  try {
    report = ((JSON.parse(body.toString('utf8')) as { 'csp-report'?: Record<string, unknown> })['csp-report'] ?? {}) as Record<
      string,
      unknown
    >;
  } catch {
    // Not JSON: logged as an empty report.
  }
  const field = (name: string): string => String(report[name] ?? '').slice(0, 300);
  ctx.deps.logger.warn(
    {
      requestId: ctx.state.requestId,
      documentUri: field('document-uri'),
      directive: field('violated-directive'),
      blockedUri: field('blocked-uri'),
    },
    'content security policy violation',
  );
  ctx.status = 204;
}

async function serveSession(ctx: ApiContext, limit: Limit | undefined): Promise<void> {
  try {
    if (ctx.path === SIGN_IN_PATH && (ctx.method === 'GET' || ctx.method === 'HEAD')) return await showSignIn(ctx);
    // Sign-in attempts count against the client's address, as unauthenticated API requests do.
    if (ctx.path === SIGN_IN_PATH && ctx.method === 'POST') return await (limit ? limit(ctx, () => submitSignIn(ctx)) : submitSignIn(ctx));
    if (ctx.path === SIGN_OUT_PATH && ctx.method === 'POST') return await submitSignOut(ctx);
    // Single sign-on's two legs count against the client's address too: each asks the identity provider.
    if (ctx.path === SSO_PATH && ctx.method === 'GET') return await (limit ? limit(ctx, () => startSso(ctx)) : startSso(ctx));
    if (ctx.path === SSO_CALLBACK_PATH && ctx.method === 'GET') return await (limit ? limit(ctx, () => finishSso(ctx)) : finishSso(ctx));
    throw notFound();
  } catch (thrown) {
    const error = toApiError(thrown);
    if (error.status >= 500) ctx.app.emit('error', thrown, ctx);
    sendErrorPage(ctx, error, undefined);
  }
}

/**
 * The run pages for people: /app/… (HCP Terraform's page URLs), sign-in at /session, their assets and
 * the policy's report endpoint. Everything else goes on to the API.
 */
export function pages(rateLimiter: RateLimiterAbstract | undefined) {
  const limit = rateLimiter ? rateLimit(rateLimiter) : undefined;
  return async (ctx: ApiContext, next: Next): Promise<void> => {
    const path = ctx.path;
    if (path === '/app' || path.startsWith('/app/')) return servePage(ctx, limit);
    if (path === SIGN_IN_PATH || path.startsWith(`${SIGN_IN_PATH}/`)) return serveSession(ctx, limit);
    if ((path.startsWith('/assets/') || path === '/favicon.ico') && (ctx.method === 'GET' || ctx.method === 'HEAD') && serveAsset(ctx))
      return;
    // Anyone may report, so reports count against the sender's address: they cannot flood the log.
    if (path === CSP_REPORT_PATH && ctx.method === 'POST') return limit ? limit(ctx, () => receiveCspReport(ctx)) : receiveCspReport(ctx);
    await next();
  };
}
