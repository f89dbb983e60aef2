import type { Middleware } from 'koa';

/**
 * The policy of an HTML page that sets none of its own: its scripts and styles from this origin only
 * (no inline script), and never framed (clickjacking). Inline styles stay allowed: the job dashboard's
 * loading screen uses them, and they run no code.
 */
export const DEFAULT_HTML_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * Headers every answer carries, whoever wrote it (routes, the error model, the dashboard, the docs):
 * `nosniff`, so no browser reads a JSON or text answer as HTML or script, and on HTML answers a
 * Content-Security-Policy, the default one unless the page set its own (pages that need an inline script
 * allow exactly theirs).
 */
/** What every answer carries whatever its type (an answer made before the chain sets these too). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = { 'X-Content-Type-Options': 'nosniff' };

export const securityHeaders: Middleware = async (ctx, next) => {
  ctx.set(SECURITY_HEADERS);
  try {
    await next();
  } finally {
    if (ctx.response.is('html') && !ctx.response.get('Content-Security-Policy')) ctx.set('Content-Security-Policy', DEFAULT_HTML_POLICY);
  }
};
