import { ApiError } from '@runtasks/shared/errors';
import type { ParameterizedContext } from 'koa';
import { cliBundle, cliPackageVersion } from './bundle.ts';

/** Where the CLI and its checksum are served: outside /api/v2, no token (a pipeline fetches it before it has one in use). */
export const CLI_PATH = '/cli/runtasks.mjs';
export const CLI_SHA256_PATH = `${CLI_PATH}.sha256`;

/** The version this service answers as (`X-Runtasks-Version` on /api/v2/ping): only this service sends it. */
export const SERVICE_VERSION = cliPackageVersion();

/**
 * `GET /cli/runtasks.mjs` (the one-file CLI) and `GET /cli/runtasks.mjs.sha256` (its SHA-256 in
 * `sha256sum` format, so `sha256sum -c` checks a download). True when it answered.
 */
export async function serveCli(ctx: ParameterizedContext): Promise<boolean> {
  if (ctx.path !== CLI_PATH && ctx.path !== CLI_SHA256_PATH) return false;
  let bundle;
  try {
    bundle = await cliBundle();
  } catch {
    throw new ApiError(503, 'service unavailable', 'The CLI cannot be built by this installation (cli/ sources or esbuild missing).');
  }
  ctx.set('X-Runtasks-Version', bundle.version);
  ctx.set('ETag', `"${bundle.sha256}"`);
  // A new release serves another file at the same URL: check with the ETag every time.
  ctx.set('Cache-Control', 'no-cache');
  if (ctx.path === CLI_SHA256_PATH) {
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = `${bundle.sha256}  runtasks.mjs\n`;
    return true;
  }
  ctx.status = 200;
  if (ctx.fresh) {
    ctx.status = 304;
    return true;
  }
  ctx.type = 'text/javascript; charset=utf-8';
  ctx.set('Content-Disposition', 'attachment; filename="runtasks.mjs"');
  ctx.body = bundle.code;
  return true;
}
