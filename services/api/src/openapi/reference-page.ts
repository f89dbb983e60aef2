import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ParameterizedContext } from 'koa';

/**
 * The API reference at `/docs`: Swagger UI from the `swagger-ui-dist` package, served by this process
 * (no CDN), reading `/openapi.json`. Only the files listed here are served, so no path reaches the disk.
 */

export const REFERENCE_PATH = '/docs';
const ASSET_PREFIX = `${REFERENCE_PATH}/assets/`;

const SWAGGER_UI_DIR = dirname(fileURLToPath(import.meta.resolve('swagger-ui-dist/package.json')));
const OWN_ASSETS_DIR = fileURLToPath(new URL('./assets/', import.meta.url));

const ASSETS = new Map<string, { file: string; type: string }>(
  Object.entries({
    'swagger-ui.css': { file: join(SWAGGER_UI_DIR, 'swagger-ui.css'), type: 'text/css; charset=utf-8' },
    'index.css': { file: join(SWAGGER_UI_DIR, 'index.css'), type: 'text/css; charset=utf-8' },
    'swagger-ui-bundle.js': { file: join(SWAGGER_UI_DIR, 'swagger-ui-bundle.js'), type: 'text/javascript; charset=utf-8' },
    'favicon-32x32.png': { file: join(SWAGGER_UI_DIR, 'favicon-32x32.png'), type: 'image/png' },
    'reference-init.js': { file: join(OWN_ASSETS_DIR, 'reference-init.js'), type: 'text/javascript; charset=utf-8' },
  }),
);

/**
 * Scripts only from this origin (no inline script: the initializer is a file). Swagger UI sets inline
 * styles and draws icons as data: images; try-it-out calls the API, which may sit at the public base URL.
 */
export function referencePolicy(publicBaseUrl: string): string {
  const api = new URL(publicBaseUrl).origin;
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    `connect-src 'self' ${api}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

function escapeAttribute(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function referenceHtml(openApiUrl: string): string {
  const asset = (name: string) => `${ASSET_PREFIX}${name}`;
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Run Tasks API reference</title>
    <link rel="stylesheet" href="${asset('swagger-ui.css')}" />
    <link rel="stylesheet" href="${asset('index.css')}" />
    <link rel="icon" type="image/png" href="${asset('favicon-32x32.png')}" />
  </head>
  <body>
    <div id="swagger-ui" data-openapi-url="${escapeAttribute(openApiUrl)}"></div>
    <script src="${asset('swagger-ui-bundle.js')}"></script>
    <script src="${asset('reference-init.js')}"></script>
  </body>
</html>
`;
}

const cache = new Map<string, Buffer>();

async function assetBody(file: string): Promise<Buffer> {
  let body = cache.get(file);
  if (!body) {
    body = await readFile(file);
    cache.set(file, body);
  }
  return body;
}

/** Answers the reference page and its assets; false for any other path (the caller goes on). */
export async function serveReference(ctx: ParameterizedContext, openApiUrl: string, publicBaseUrl: string): Promise<boolean> {
  const asset = ctx.path.startsWith(ASSET_PREFIX) ? ASSETS.get(ctx.path.slice(ASSET_PREFIX.length)) : undefined;
  if (ctx.path === REFERENCE_PATH) {
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Content-Security-Policy', referencePolicy(publicBaseUrl));
    ctx.set('Cache-Control', 'no-cache');
    ctx.body = referenceHtml(openApiUrl);
  } else if (asset) {
    ctx.type = asset.type;
    // The package's files change only with an upgrade, which restarts the process.
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = await assetBody(asset.file);
  } else {
    return false;
  }
  ctx.set('X-Content-Type-Options', 'nosniff');
  return true;
}
