import { isPlausibleToken } from '@runtasks/shared/security';
import type { Principal } from '../auth/principal.ts';
import type { ApiContext } from '../context.ts';
import { clearCookie, SIGN_IN_COOKIE } from './cookies.ts';
import { checkCsrf, csrfTokenFor, signInBinding } from './csrf.ts';
import { readForm } from './form.ts';
import { html } from './html.ts';
import { sendPage } from './layout.ts';
import { currentSession, signIn, signOut } from './session.ts';

export const SIGN_IN_PATH = '/session';

/** Where a sign-in may lead afterwards: a page of this service, nothing else (no open redirect). */
const NEXT_PATH = /^\/app(\/[A-Za-z0-9_-]+)*$/;
const nextOf = (value: string | undefined): string | undefined => (value && NEXT_PATH.test(value) ? value : undefined);

/** Where a principal lands: the site admin on the list of organizations, everyone else on their own. */
export const homeOf = (principal: Principal, organizationName: string | null): string =>
  principal.kind === 'admin' || !organizationName ? '/app' : `/app/${organizationName}`;

function sendForm(ctx: ApiContext, next: string | undefined, problem?: string): void {
  const binding = signInBinding(ctx);
  sendPage(ctx, {
    status: problem ? 401 : 200,
    title: 'Sign in',
    session: undefined,
    body: html`<h1>Sign in</h1>
      <p>
        Paste an API token: a team token, an organization token or the site-admin token. The pages show what the token may read through the
        API, and allow what it may do.
      </p>
      ${problem ? html`<p class="notice error" role="alert">${problem}</p>` : undefined}
      <form method="post" action="${SIGN_IN_PATH}" class="sign-in">
        <input type="hidden" name="csrf" value="${csrfTokenFor(ctx, binding)}" />
        ${next ? html`<input type="hidden" name="next" value="${next}" />` : undefined}
        <label for="token">API token</label>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required autofocus />
        <button type="submit">Sign in</button>
      </form>`,
  });
}

export async function showSignIn(ctx: ApiContext): Promise<void> {
  const next = nextOf(typeof ctx.query['next'] === 'string' ? ctx.query['next'] : undefined);
  const session = await currentSession(ctx);
  if (session) return ctx.redirect(next ?? homeOf(session.principal, session.organizationName));
  sendForm(ctx, next);
}

export async function submitSignIn(ctx: ApiContext): Promise<void> {
  const form = await readForm(ctx);
  checkCsrf(ctx, signInBinding(ctx), form.get('csrf'));
  const next = nextOf(form.get('next'));
  const token = (form.get('token') ?? '').trim();
  const principal = isPlausibleToken(token) ? await signIn(ctx, token) : undefined;
  if (!principal) return sendForm(ctx, next, 'That is not a valid API token: it may be mistyped, expired or revoked.');
  clearCookie(ctx, SIGN_IN_COOKIE);
  ctx.status = 303;
  // /app sends each principal on to its home.
  ctx.redirect(next ?? '/app');
}

export async function submitSignOut(ctx: ApiContext): Promise<void> {
  const session = await currentSession(ctx);
  const form = await readForm(ctx);
  if (session) checkCsrf(ctx, session.id, form.get('csrf'));
  await signOut(ctx, session);
  ctx.status = 303;
  ctx.redirect(SIGN_IN_PATH);
}
