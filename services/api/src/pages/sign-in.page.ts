import { isPlausibleToken } from '@runtasks/shared/security';
import { lookUpToken } from '../auth/authenticate.ts';
import type { Principal } from '../auth/principal.ts';
import { poolOf, type ApiContext } from '../context.ts';
import { audit } from '../services/audit.service.ts';
import { checkForm, checkSameOrigin, csrfToken, returnedSignInBinding, signInBinding } from './browser-rules.ts';
import { pageError } from './errors.ts';
import { readForm } from './form.ts';
import { html, type SafeHtml } from './html.ts';
import { sendPage, SIGN_IN_PATH, SSO_PATH } from './layout.ts';
import { currentSession, endSession, startSession } from './session.ts';

export { SIGN_IN_PATH, SIGN_OUT_PATH } from './layout.ts';

/** Where a sign-in may lead afterwards: a page of this service, nothing else (no open redirect). */
const NEXT_PATH = /^\/app(\/[A-Za-z0-9_-]+)*$/;
export const nextOf = (value: string | undefined): string | undefined => (value && NEXT_PATH.test(value) ? value : undefined);

/** Where a principal lands: the site admin on the list of organizations, everyone else on their own. */
export const homeOf = (principal: Principal, organizationName: string | null): string =>
  principal.kind === 'admin' || !organizationName ? '/app' : `/app/${organizationName}`;

/** "Sign in with SSO" where single sign-on is configured: a link, as the provider is reached by a top-level navigation. */
function ssoOffer(ctx: ApiContext, next: string | undefined): SafeHtml | undefined {
  if (!ctx.deps.config.oidc) return undefined;
  const href = next ? `${SSO_PATH}?next=${encodeURIComponent(next)}` : SSO_PATH;
  return html`<p><a class="button" href="${href}">Sign in with SSO</a></p>`;
}

function tokenForm(ctx: ApiContext, next: string | undefined): SafeHtml {
  const binding = signInBinding(ctx);
  return html`<p>
      ${ctx.deps.config.oidc ? 'Or paste' : 'Paste'} an API token: a team token, an organization token or the site-admin token. The pages
      show what the token may read through the API, and allow what it may do.
    </p>
    <form method="post" action="${SIGN_IN_PATH}" class="sign-in">
      <input type="hidden" name="csrf" value="${csrfToken(ctx, binding)}" />
      ${next ? html`<input type="hidden" name="next" value="${next}" />` : undefined}
      <label for="token">API token</label>
      <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required autofocus />
      <button type="submit">Sign in</button>
    </form>`;
}

function sendForm(ctx: ApiContext, next: string | undefined, problem?: string): void {
  const tokens = ctx.deps.config.pagesTokenSignIn;
  const sso = ssoOffer(ctx, next);
  sendPage(ctx, {
    status: problem ? 401 : 200,
    title: 'Sign in',
    session: undefined,
    body: html`<h1>Sign in</h1>
      ${problem ? html`<p class="notice error" role="alert">${problem}</p>` : undefined} ${sso} ${tokens ? tokenForm(ctx, next) : undefined}
      ${!tokens && !sso ? html`<p class="notice error" role="alert">No way of signing in is configured here.</p>` : undefined}`,
  });
}

export async function showSignIn(ctx: ApiContext): Promise<void> {
  const next = nextOf(typeof ctx.query['next'] === 'string' ? ctx.query['next'] : undefined);
  const session = await currentSession(ctx);
  if (session) return ctx.redirect(next ?? homeOf(session.principal, session.organizationName));
  sendForm(ctx, next);
}

/**
 * The API-token sign-in: the form posted from this origin with the CSRF token of the binding the form
 * gave this browser (a binding it did not get from our form, or a form from elsewhere, is a 403), and a
 * live token. The session is for the token (startSession).
 */
export async function submitSignIn(ctx: ApiContext): Promise<void> {
  // Switched off (RUN_PAGES_TOKEN_SIGN_IN=false): people sign in through the identity provider only.
  if (!ctx.deps.config.pagesTokenSignIn) throw pageError(403, 'Signing in with an API token is switched off here. Sign in with SSO.');
  const form = await readForm(ctx);
  checkForm(ctx, returnedSignInBinding(ctx), form.get('csrf'));
  const next = nextOf(form.get('next'));
  const token = (form.get('token') ?? '').trim();
  const known = isPlausibleToken(token) ? await lookUpToken(await poolOf(ctx), ctx.deps.secrets.hashToken(token)) : undefined;
  if (!known || !(await startSession(ctx, { kind: 'api-token', tokenId: known.tokenId })))
    return sendForm(ctx, next, 'That is not a valid API token: it may be mistyped, expired or revoked.');
  // A sign-in is in its organization's audit trail (the site admin's belongs to none).
  // A person's sign-in is in the trail of each organization they belong to.
  const principal = known.principal;
  const organizations =
    principal.kind === 'admin' ? [] : principal.kind === 'user' ? [...principal.organizations.keys()] : [principal.organizationId];
  for (const organizationId of organizations)
    await audit(ctx, organizationId, { type: 'session', id: known.tokenId }, 'sign_in', null, principal);
  ctx.status = 303;
  // /app sends each principal on to its home.
  ctx.redirect(next ?? '/app');
}

/**
 * Sign-out: only from the pages themselves, with the session's CSRF token (else 403, and nothing
 * changes). Without a session there is nothing to end: on to the sign-in form, cookies untouched.
 */
export async function submitSignOut(ctx: ApiContext): Promise<void> {
  checkSameOrigin(ctx);
  const form = await readForm(ctx);
  const session = await currentSession(ctx);
  if (session) {
    checkForm(ctx, session.id, form.get('csrf'));
    await endSession(ctx, session);
  }
  ctx.status = 303;
  ctx.redirect(SIGN_IN_PATH);
}
