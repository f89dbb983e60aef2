import { ApiError } from '@runtasks/shared/errors';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** How fast a request body must arrive (UPLOAD_MIN_BYTES_PER_SECOND over UPLOAD_RATE_WINDOW_SECONDS). */
export interface BodyRate {
  minBytesPerSecond: number;
  windowMs: number;
}

export const DEFAULT_BODY_RATE: BodyRate = { minBytesPerSecond: 16 * 1024, windowMs: 30_000 };

const hasBody = (req: IncomingMessage): boolean =>
  req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

const TIMEOUT_ERROR = {
  status: '408',
  title: 'request timeout',
  detail:
    'The request body arrived slower than this service takes (UPLOAD_MIN_BYTES_PER_SECOND over UPLOAD_RATE_WINDOW_SECONDS), so the upload was cut.',
};
const TIMEOUT_JSON = JSON.stringify({ errors: [TIMEOUT_ERROR] });
const TIMEOUT_RESPONSE = `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/vnd.api+json\r\nContent-Length: ${Buffer.byteLength(TIMEOUT_JSON)}\r\nConnection: close\r\n\r\n${TIMEOUT_JSON}`;

/**
 * Cuts a request whose body arrives slower than `rate`: at the end of each window, a body still being
 * received must have brought at least minBytesPerSecond × the window's seconds in it. Instead of one
 * fixed deadline for a whole request: an honest 49 MB upload at 1 MB/s takes as long as it needs, and a
 * client that stops sending (to hold the server's memory or a connection) is cut within a window. A
 * body that finishes within its first window is never cut. Measured on the socket's bytes, so a body
 * the service itself is slow to read (backpressure) counts as slow too: the rate is far below any
 * storage's. Answers 408 (JSON:API) where nothing was answered yet, and closes the connection.
 */
export function guardBodyRate(req: IncomingMessage, res: ServerResponse, rate: BodyRate): void {
  if (!hasBody(req)) return;
  const socket = req.socket;
  let seen = socket.bytesRead;
  const timer = setInterval(() => {
    if (req.complete || res.writableEnded || socket.destroyed) {
      clearInterval(timer);
      return;
    }
    const received = socket.bytesRead - seen;
    seen = socket.bytesRead;
    if (received >= (rate.minBytesPerSecond * rate.windowMs) / 1000) return;
    clearInterval(timer);
    // The request fails where it is read (its upload stops and is removed); the 408 goes straight to the
    // socket first, as the handler waiting for the body has answered nothing yet.
    const cut = new ApiError(408, TIMEOUT_ERROR.title, TIMEOUT_ERROR.detail);
    if (res.headersSent) req.destroy(cut);
    else socket.write(TIMEOUT_RESPONSE, () => req.destroy(cut));
  }, rate.windowMs);
  timer.unref();
  res.once('close', () => clearInterval(timer));
}
