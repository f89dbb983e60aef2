import { ApiError } from '@runtasks/shared/errors';
import type { IncomingMessage } from 'node:http';

/** What a raw body is and which setting limits it, for the 413 that states the limit. */
export interface BodyLimit {
  /** "The plan JSON", "The configuration archive". */
  what: string;
  /** The configuration variable an operator changes it with. */
  setting: string;
}

/** `52428800 bytes (50 MiB)`: the limit as bytes, and in MiB where it is a whole number of them. */
export function describeBytes(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  return Number.isInteger(mib) && mib > 0 ? `${bytes} bytes (${mib} MiB)` : `${bytes} bytes`;
}

/** Reads a request body of at most `limit` bytes; more is a 413 (announced or not) that states the limit. */
export async function readRawBody(request: IncomingMessage, limit: number, body?: BodyLimit): Promise<Buffer> {
  const tooLarge = (): ApiError =>
    new ApiError(
      413,
      'payload too large',
      body
        ? `${body.what} is larger than this service takes: at most ${describeBytes(limit)}, set by ${body.setting}.`
        : `The upload exceeds the limit of ${describeBytes(limit)}.`,
      undefined,
      {},
      { 'limit-bytes': limit },
    );
  const announced = Number(request.headers['content-length']);
  if (Number.isFinite(announced) && announced > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  // Not destroyed when the loop stops early: destroying the request would reset its connection (and
  // the client's keep-alive) before the answer is sent.
  for await (const chunk of request.iterator({ destroyOnReturn: false })) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      over = true;
      break;
    }
    chunks.push(chunk as Buffer);
  }
  if (over) {
    // The rest is read and dropped (never held), so the answer arrives whole and the connection serves the next request.
    request.resume();
    throw tooLarge();
  }
  return Buffer.concat(chunks);
}
