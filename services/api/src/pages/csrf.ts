import { safeEqualHex } from '@runtasks/shared/security';
import { randomBytes } from 'node:crypto';
import type { ApiContext } from '../context.ts';
import { readCookie, setCookie, SIGN_IN_COOKIE } from './cookies.ts';
import { pageError } from './errors.ts';

/**
 * Every form carries a token that only this service can make, bound to the browser: a keyed hash of
 * its session id (or, before sign-in, of a random value in its own cookie). A form posted from another
 * site cannot know it; SameSite=Strict cookies and the Sec-Fetch-Site check below are further walls.
 */
export const csrfTokenFor = (ctx: ApiContext, binding: string): string => ctx.deps.secrets.hashToken(`page-csrf:${binding}`);

/** The sign-in form's binding: the browser's own random value, set when the form is shown. */
export function signInBinding(ctx: ApiContext): string {
  const existing = readCookie(ctx, SIGN_IN_COOKIE);
  if (existing) return existing;
  const value = randomBytes(32).toString('base64url');
  setCookie(ctx, SIGN_IN_COOKIE, value, 3600);
  return value;
}

/** Refuses (403) a form whose token is not this browser's, or a request the browser says came from another site. */
export function checkCsrf(ctx: ApiContext, binding: string | undefined, submitted: string | undefined): void {
  if (ctx.get('sec-fetch-site') === 'cross-site') throw pageError(403, 'This form was sent from another site.');
  const expected = binding === undefined ? undefined : csrfTokenFor(ctx, binding);
  if (!expected || !submitted || !/^[0-9a-f]{64}$/.test(submitted) || !safeEqualHex(expected, submitted))
    throw pageError(403, 'This form has expired or did not come from this page. Reload the page and try again.');
}
