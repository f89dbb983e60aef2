import type { ApiContext } from '../context.ts';
import { FAVICON, SCRIPT, STYLESHEET } from './assets.ts';
import { csrfToken } from './browser-rules.ts';
import { html, type Html, type SafeHtml } from './html.ts';
import type { PageSession } from './session.ts';

export const CSP_REPORT_PATH = '/csp-report';
/** Where a browser signs in and out (the pages' only paths outside /app). */
export const SIGN_IN_PATH = '/session';
export const SIGN_OUT_PATH = `${SIGN_IN_PATH}/sign-out`;
/** Single sign-on: off to the identity provider, and back (the redirect URI registered there). */
export const SSO_PATH = `${SIGN_IN_PATH}/oidc`;
export const SSO_CALLBACK_PATH = `${SSO_PATH}/callback`;

/**
 * The pages' policy: scripts and styles only from this service's own files (no inline script or
 * style, no eval), nothing loaded from elsewhere, forms posted only here, never framed. Violations are
 * reported, so an attempt to inject something shows up in the logs.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  `report-uri ${CSP_REPORT_PATH}`,
].join('; ');

/** Headers of every page and fragment: the policy, no sniffing, no framing, nothing cached or referred elsewhere. */
export function setPageHeaders(ctx: ApiContext): void {
  ctx.set('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Referrer-Policy', 'same-origin');
  ctx.set('Cache-Control', 'no-store');
}

export interface Crumb {
  label: string;
  href?: string;
}

function breadcrumbs(crumbs: readonly Crumb[]): SafeHtml | undefined {
  if (crumbs.length === 0) return undefined;
  const items = crumbs.map((crumb, index) =>
    index === crumbs.length - 1 || !crumb.href
      ? html`<li><span aria-current="page">${crumb.label}</span></li>`
      : html`<li><a href="${crumb.href}">${crumb.label}</a></li>`,
  );
  return html`<nav class="crumbs" aria-label="Breadcrumb">
    <ol>
      ${items}
    </ol>
  </nav>`;
}

function siteHeader(ctx: ApiContext, session: PageSession | undefined, stableToken: boolean): SafeHtml {
  const who = session
    ? html`<p class="who">Signed in as <strong>${session.label}</strong></p>
        <form method="post" action="${SIGN_OUT_PATH}" class="sign-out">
          <input type="hidden" name="csrf" value="${csrfToken(ctx, session.id, stableToken)}" />
          <button type="submit">Sign out</button>
        </form>`
    : undefined;
  return html`<header class="site">
    <a class="brand" href="/app">Run Tasks</a>
    ${who}
  </header>`;
}

export interface PageOptions {
  status?: number;
  title: string;
  session: PageSession | undefined;
  crumbs?: readonly Crumb[];
  body: Html;
  /** The page holds no text from elsewhere: its form token may stay the same (csrfToken's `stable`). */
  stableToken?: boolean;
}

/** Sends a whole page: the shell (header, breadcrumbs, main) around the page's own body. */
export function sendPage(ctx: ApiContext, options: PageOptions): void {
  setPageHeaders(ctx);
  ctx.status = options.status ?? 200;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="color-scheme" content="light dark" />
        <title>${options.title} · Run Tasks</title>
        <link rel="icon" href="${FAVICON.path}" type="image/svg+xml" />
        <link rel="stylesheet" href="${STYLESHEET.path}" />
        <script src="${SCRIPT.path}" defer></script>
      </head>
      <body>
        <a class="skip" href="#main">Skip to content</a>
        ${siteHeader(ctx, options.session, options.stableToken === true)}
        <main id="main" tabindex="-1">${breadcrumbs(options.crumbs ?? [])} ${options.body}</main>
      </body>
    </html> `.value;
}

/** Sends a fragment of a page (the run's live part), with the same headers as a page. */
export function sendFragment(ctx: ApiContext, fragment: SafeHtml): void {
  setPageHeaders(ctx);
  ctx.status = 200;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = fragment.value;
}
