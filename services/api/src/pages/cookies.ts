import type { ApiContext } from '../context.ts';

export const SESSION_COOKIE = 'runtasks_session';
/** Holds the sign-in form's CSRF secret until a session replaces it. */
export const SIGN_IN_COOKIE = 'runtasks_sign_in';

/**
 * Whether the browser reached us over HTTPS: this connection is TLS (or a trusted proxy said so, where
 * the app trusts proxies), or the service's public address is https (a TLS-terminating proxy in front).
 */
export const isSecure = (ctx: ApiContext): boolean => ctx.secure || ctx.deps.config.publicBaseUrl.startsWith('https:');

/** Sets a cookie that scripts cannot read and other sites never send: HttpOnly, SameSite=Strict, Secure over HTTPS. */
export function setCookie(ctx: ApiContext, name: string, value: string, maxAgeSeconds: number): void {
  const attributes = [`${name}=${value}`, 'Path=/', `Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`, 'HttpOnly', 'SameSite=Strict'];
  if (isSecure(ctx)) attributes.push('Secure');
  // Set-Cookie by hand: Koa's cookies refuse `secure` on a connection that is not TLS itself, which is
  // exactly the case behind a TLS-terminating proxy.
  ctx.append('Set-Cookie', attributes.join('; '));
}

export const clearCookie = (ctx: ApiContext, name: string): void => setCookie(ctx, name, '', 0);

/** A cookie's value as the browser sent it; only the shapes this service sets are accepted. */
export function readCookie(ctx: ApiContext, name: string): string | undefined {
  for (const part of (ctx.get('cookie') || '').split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) {
      const value = rest.join('=');
      return /^[A-Za-z0-9_-]{32,64}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}
