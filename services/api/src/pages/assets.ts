import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ApiContext } from '../context.ts';

interface Asset {
  path: string;
  type: string;
  body: Buffer;
}

/** A file of ./static served under a name with its content's hash, so it can be cached for a year. */
function asset(file: string, type: string): Asset {
  const body = readFileSync(new URL(`./static/${file}`, import.meta.url));
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  const dot = file.lastIndexOf('.');
  return { path: `/assets/${file.slice(0, dot)}-${hash}${file.slice(dot)}`, type, body };
}

export const STYLESHEET = asset('pages.css', 'text/css; charset=utf-8');
export const SCRIPT = asset('pages.js', 'text/javascript; charset=utf-8');
export const FAVICON = asset('favicon.svg', 'image/svg+xml');
/** Browsers ask for /favicon.ico whatever a page links: it is the same icon (an SVG, which they take under that name too). */
const FAVICON_ICO = { ...FAVICON, path: '/favicon.ico' };
const BY_PATH = new Map([STYLESHEET, SCRIPT, FAVICON, FAVICON_ICO].map((entry) => [entry.path, entry]));

/** Answers a request for an asset; false when the path names none. */
export function serveAsset(ctx: ApiContext): boolean {
  const found = BY_PATH.get(ctx.path);
  if (!found) return false;
  // A hashed name never changes its content; /favicon.ico may, with a release.
  ctx.set('Cache-Control', found === FAVICON_ICO ? 'public, max-age=86400' : 'public, max-age=31536000, immutable');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.type = found.type;
  ctx.body = found.body;
  return true;
}
