import { safeEqualHex } from '@runtasks/shared/security';
import { randomBytes } from 'node:crypto';
import type { ApiContext } from '../context.ts';
import { pageError } from './errors.ts';

/**
 * The rules a browser's requests to the pages are held to, all in one place (docs/run-pages.md,
 * "Sessions"): which cookies the pages set and read, and what a request that changes something must
 * show (its origin, and a CSRF token only this service can make for this browser). Any way of signing
 * in (session.ts starts the session) goes through these rules; none has rules of its own.
 */

/**
 * The cookies the pages set: the session, the sign-in form's CSRF binding until a session replaces it,
 * and a single sign-on under way (its state, nonce and PKCE verifier wait on the server under it).
 */
export const COOKIES = { session: 'runtasks_session', signIn: 'runtasks_sign_in', oidc: 'runtasks_oidc' } as const;
export type CookieKind = keyof typeof COOKIES;

/**
 * Whether the browser reached us over HTTPS: this connection is TLS (or a trusted proxy said so, where
 * the app trusts proxies), or the service's public address is https (a TLS-terminating proxy in front).
 */
export const isSecure = (ctx: ApiContext): boolean => ctx.secure || ctx.deps.config.publicBaseUrl.startsWith('https:');

/**
 * A cookie's name: over HTTPS with the `__Host-` prefix, which browsers accept only from this very
 * host, `Secure`, for the path `/` and without a `Domain`, so a neighbouring subdomain can neither set
 * nor shadow it. Plain HTTP (development) has no such prefix: there the names are bare.
 */
export const cookieName = (ctx: ApiContext, kind: CookieKind): string => (isSecure(ctx) ? `__Host-${COOKIES[kind]}` : COOKIES[kind]);

/**
 * How each cookie travels. The session is `Lax`: sent on a top-level navigation from another site, so
 * a `run_app_url` clicked in a chat or mail client opens the run for a signed-in person, and never on
 * another site's POST, fetch or frame. Lax alone does not make a request trustworthy, so every request
 * that changes something is checked below (origin, CSRF token), and no GET changes anything. The
 * sign-in binding is only ever needed by the form's own POST: `Strict`. A single sign-on's binding
 * must come back with the identity provider's redirect, a top-level GET from its site: `Lax`.
 */
const SAME_SITE: Record<CookieKind, 'Lax' | 'Strict'> = { session: 'Lax', signIn: 'Strict', oidc: 'Lax' };

/** Sets one of the pages' cookies: HttpOnly (scripts cannot read it), `Secure` with its `__Host-` name over HTTPS. */
export function setCookie(ctx: ApiContext, kind: CookieKind, value: string, maxAgeSeconds: number): void {
  const attributes = [
    `${cookieName(ctx, kind)}=${value}`,
    'Path=/',
    `Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`,
    'HttpOnly',
    `SameSite=${SAME_SITE[kind]}`,
  ];
  if (isSecure(ctx)) attributes.push('Secure');
  // Set-Cookie by hand: Koa's cookies refuse `secure` on a connection that is not TLS itself, which is
  // exactly the case behind a TLS-terminating proxy.
  ctx.append('Set-Cookie', attributes.join('; '));
}

export const clearCookie = (ctx: ApiContext, kind: CookieKind): void => setCookie(ctx, kind, '', 0);

/**
 * A cookie's value as the browser sent it, in the shape this service sets. A name sent twice means
 * someone else set one too (over plain HTTP a neighbouring subdomain can, for a parent domain or a
 * narrower path, and the browser sends the narrower one first): neither is trusted.
 */
export function readCookie(ctx: ApiContext, kind: CookieKind): string | undefined {
  const name = cookieName(ctx, kind);
  const values = (ctx.get('cookie') || '')
    .split(';')
    .map((part) => part.trim().split('='))
    .filter(([key]) => key === name)
    .map(([, ...rest]) => rest.join('='));
  const [value] = values;
  return values.length === 1 && value !== undefined && /^[A-Za-z0-9_-]{32,64}$/.test(value) ? value : undefined;
}

/**
 * The origins the service answers at: its public address, and the one this request was sent to (its
 * Host, a loopback address, say). Spelled out: Koa's `ctx.origin` is the request's Origin header.
 */
function ownOrigins(ctx: ApiContext): Set<string> {
  return new Set([new URL(ctx.deps.config.publicBaseUrl).origin, `${ctx.protocol}://${ctx.host}`]);
}

/**
 * Refuses (403) a request that changes something unless it comes from one of the pages themselves:
 * `Sec-Fetch-Site` `same-origin`, or `none` (typed or bookmarked by the person). A same-site sender (a
 * sibling subdomain) is refused like any other site. A browser without `Sec-Fetch-Site` is judged by
 * `Origin`; a request with neither header comes from no browser (no cookie rides along by itself
 * there) and is left to the CSRF token.
 */
export function checkSameOrigin(ctx: ApiContext): void {
  const site = ctx.get('sec-fetch-site');
  if (site) {
    if (site === 'same-origin' || site === 'none') return;
    throw pageError(403, 'This form was sent from another site.');
  }
  const origin = ctx.get('origin');
  if (origin && !ownOrigins(ctx).has(origin)) throw pageError(403, 'This form was sent from another site.');
}

/** A CSRF token's secret for a binding (a session id, or the sign-in form's random value): a keyed hash. */
const csrfSecret = (ctx: ApiContext, binding: string): Buffer => Buffer.from(ctx.deps.secrets.hashToken(`page-csrf:${binding}`), 'hex');

/**
 * The CSRF token a form carries, bound to the browser: its secret (a keyed hash of the binding, which
 * only this service can make) masked with fresh random bytes, so it differs in every response and a
 * compressed page gives away nothing of it through its length (BREACH). A page with no text from
 * elsewhere in it (a 404, which must read byte for byte the same whatever was missing or hidden)
 * offers nothing to compress it against, and takes it unmasked (`stable`).
 */
export function csrfToken(ctx: ApiContext, binding: string, stable = false): string {
  const secret = csrfSecret(ctx, binding);
  const mask = stable ? Buffer.alloc(secret.length) : randomBytes(secret.length);
  const masked = Buffer.from(secret.map((byte, index) => byte ^ (mask[index] ?? 0)));
  return mask.toString('hex') + masked.toString('hex');
}

/** The sign-in form's binding: the browser's own random value, set when the form is shown. */
export function signInBinding(ctx: ApiContext): string {
  const existing = readCookie(ctx, 'signIn');
  if (existing) return existing;
  const value = randomBytes(32).toString('base64url');
  setCookie(ctx, 'signIn', value, 3600);
  return value;
}

/** The sign-in form's binding as the browser sent it back, or nothing (it did not get one from our form). */
export const returnedSignInBinding = (ctx: ApiContext): string | undefined => readCookie(ctx, 'signIn');

/**
 * Every request that changes something: from the pages themselves (checkSameOrigin), carrying the CSRF
 * token of this browser's binding. Anything else is a 403 that changes nothing.
 */
export function checkForm(ctx: ApiContext, binding: string | undefined, submitted: string | undefined): void {
  checkSameOrigin(ctx);
  const valid =
    binding !== undefined &&
    submitted !== undefined &&
    /^[0-9a-f]{128}$/.test(submitted) &&
    safeEqualHex(unmask(submitted), csrfSecret(ctx, binding).toString('hex'));
  if (!valid) throw pageError(403, 'This form has expired or did not come from this page. Reload the page and try again.');
}

function unmask(token: string): string {
  const mask = Buffer.from(token.slice(0, 64), 'hex');
  const masked = Buffer.from(token.slice(64), 'hex');
  return Buffer.from(masked.map((byte, index) => byte ^ (mask[index] ?? 0))).toString('hex');
}
