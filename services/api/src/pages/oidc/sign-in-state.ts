import { prepared, runPrepared } from '@runtasks/shared/db';
import { randomBytes } from 'node:crypto';
import { poolOf, type ApiContext } from '../../context.ts';
import { clearCookie, readCookie, setCookie } from '../browser-rules.ts';
import type { PendingSignIn } from './relying-party.ts';

/**
 * A single sign-on under way, between the browser leaving for the identity provider and coming back:
 * its state, nonce and PKCE verifier wait in the database under a keyed hash of a random id, and the
 * id in this browser's `runtasks_oidc` cookie. The return takes them once (a replayed callback finds
 * nothing), and only in the browser that left: a callback sent to someone else's browser (login CSRF)
 * has no cookie to match its state. Ten minutes are enough to sign in at the provider.
 */

const LIFETIME_SECONDS = 600;

const SAVE = prepared(
  'oidc-sign-in-save',
  `with pruned as (delete from oidc_sign_ins where id_hash in (select id_hash from oidc_sign_ins where expires_at <= now() limit 100))
   insert into oidc_sign_ins (id_hash, state, nonce, code_verifier, next, expires_at)
   values ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::double precision))`,
);

const TAKE = prepared(
  'oidc-sign-in-take',
  `delete from oidc_sign_ins where id_hash = $1 returning state, nonce, code_verifier, next, expires_at > now() as live`,
);

/** Keeps what the return is checked against, bound to this browser. */
export async function savePendingSignIn(ctx: ApiContext, pending: PendingSignIn, next: string | undefined): Promise<void> {
  const id = randomBytes(32).toString('base64url');
  await runPrepared(await poolOf(ctx), SAVE, [
    ctx.deps.secrets.hashToken(`oidc:${id}`),
    pending.state,
    pending.nonce,
    // The verifier is what makes a stolen code worthless: stored encrypted, as the service's other secrets are.
    ctx.deps.secrets.encrypt(pending.codeVerifier),
    next ?? null,
    LIFETIME_SECONDS,
  ]);
  setCookie(ctx, 'oidc', id, LIFETIME_SECONDS);
}

/** The browser's sign-in under way, taken (it cannot be used twice), or nothing: no cookie, unknown, used or expired. */
export async function takePendingSignIn(ctx: ApiContext): Promise<{ pending: PendingSignIn; next: string | null } | undefined> {
  const id = readCookie(ctx, 'oidc');
  if (!id) return undefined;
  clearCookie(ctx, 'oidc');
  const [row] = await runPrepared<{ state: string; nonce: string; code_verifier: string; next: string | null; live: boolean }>(
    await poolOf(ctx),
    TAKE,
    [ctx.deps.secrets.hashToken(`oidc:${id}`)],
  );
  if (!row?.live) return undefined;
  return { pending: { state: row.state, nonce: row.nonce, codeVerifier: ctx.deps.secrets.decrypt(row.code_verifier) }, next: row.next };
}
