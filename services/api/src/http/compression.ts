import compress from 'koa-compress';
import type { Middleware } from 'koa';
import { constants } from 'node:zlib';

/** Below this, compressing saves less than it costs (a page's shell, most API documents). */
export const COMPRESSION_THRESHOLD_BYTES = 2048;

/**
 * The media types worth compressing: text, JSON (JSON:API's too), JavaScript, SVG. An allow-list: the
 * media type database koa-compress asks by default calls `application/octet-stream` compressible, and
 * that is what a configuration version's gzip archive is sent as.
 */
const COMPRESSIBLE = /^(text\/[a-z-]+|application\/(json|[a-z.-]+\+json|javascript|xml)|image\/svg\+xml)$/;
export const isCompressible = (type: string): boolean => COMPRESSIBLE.test(type.split(';')[0]?.trim().toLowerCase() ?? '');

/**
 * Compresses what is worth it, as the client accepts: br, else gzip. Only text-like media types (above),
 * so bodies that are compressed already go out as they are, and so do bodies with a
 * Content-Encoding of their own. Every chunk a streamed body writes is flushed at
 * once (a sync flush), so a stream still reaches the client as it is produced, not when zlib's
 * buffer fills. zstd and deflate are left out: clients send gzip and br, and deflate's two readings
 * differ between clients.
 */
export function compression(): Middleware {
  return compress({
    filter: isCompressible,
    threshold: COMPRESSION_THRESHOLD_BYTES,
    gzip: { flush: constants.Z_SYNC_FLUSH },
    br: { flush: constants.BROTLI_OPERATION_FLUSH, params: { [constants.BROTLI_PARAM_QUALITY]: 4 } },
    deflate: false,
    zstd: false,
  });
}
