import type { Readable } from 'node:stream';
import { createBrotliDecompress, createUnzip } from 'node:zlib';
import { firstInvalidUtf8, firstUnkeepableNumber } from '@runtasks/shared/domain';
import { ApiError } from '@runtasks/shared/errors';
import type { IncomingMessage } from 'node:http';
import { abortedByClient } from './errors.ts';

declare module 'koa' {
  interface Request {
    body?: unknown;
  }
}

/**
 * The one place a JSON body becomes a value (docs/limits-and-security.md, "JSON bodies"): JSON:API
 * documents, callbacks and plan JSON all pass here. Bytes that are not UTF-8 are a 422 naming the byte
 * offset (never replaced by U+FFFD and kept), text that is not JSON a 400, and a number that neither a
 * JavaScript number nor PostgreSQL's numeric can hold a 422 pointing at it (never a 500 from the
 * database, never a silent null).
 */

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** What is being decoded, for the 422's title and detail: "invalid plan" / "The plan JSON". */
export interface JsonDocumentKind {
  title: string;
  what: string;
}

const REQUEST_BODY: JsonDocumentKind = { title: 'invalid request', what: 'The request body' };

export const malformedJson = (): ApiError => new ApiError(400, 'malformed JSON', 'The request body is not valid JSON.', { pointer: '' });

/** `bytes` as text: UTF-8 (a leading byte order mark is dropped, RFC 8259 §8.1), else a 422 naming the first bad byte. */
export function utf8Text(bytes: Uint8Array, kind: JsonDocumentKind = REQUEST_BODY): string {
  try {
    // The platform's decoder decides (fast); only a body it refuses is walked again to say where.
    return strictUtf8.decode(bytes);
  } catch {
    const problem = firstInvalidUtf8(bytes) ?? { offset: 0, reason: 'an ill-formed sequence' };
    throw new ApiError(
      422,
      kind.title,
      `${kind.what} is not UTF-8: byte ${problem.offset} begins ${problem.reason}.`,
      { pointer: '' },
      {},
      { 'byte-offset': problem.offset },
    );
  }
}

/** Every number in `text` (a parsed document's source) must be kept as sent: else a 422 pointing at it. */
export function checkNumbers(text: string, kind: JsonDocumentKind = REQUEST_BODY): void {
  const problem = firstUnkeepableNumber(text);
  if (problem)
    throw new ApiError(422, kind.title, `${kind.what} holds the number ${problem.literal}, which ${problem.reason}.`, {
      pointer: problem.pointer,
    });
}

/**
 * A JSON document from its bytes: UTF-8, JSON, and numbers that are kept as sent. `objectOrArray`: as
 * JSON:API bodies, a bare string or number at the root is malformed too.
 */
export function parseJsonBytes(
  bytes: Uint8Array,
  kind: JsonDocumentKind = REQUEST_BODY,
  objectOrArray = false,
): { text: string; value: unknown } {
  const text = utf8Text(bytes, kind);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw malformedJson();
  }
  if (objectOrArray && (typeof value !== 'object' || value === null)) throw malformedJson();
  // JSON.parse makes `__proto__` an own key, harmless until a spread or merge turns it into a prototype.
  if (MAYBE_PROTO_KEY.test(text) && hasProtoKey(value)) throw malformedJson();
  checkNumbers(text, kind);
  return { text, value };
}

/** A `"__proto__":` key, also spelled with \u escapes: only then is the parsed value walked for one. */
const MAYBE_PROTO_KEY =
  /"(?:_|\\u005[Ff]){2}(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff]){2}"\s*:/;

function hasProtoKey(root: unknown): boolean {
  // A stack, not recursion: the document may nest as deep as JSON.parse allows.
  const pending: unknown[] = [root];
  while (pending.length > 0) {
    const value = pending.pop();
    if (typeof value !== 'object' || value === null) continue;
    if (!Array.isArray(value) && Object.hasOwn(value, '__proto__')) return true;
    for (const item of Object.values(value)) pending.push(item);
  }
  return false;
}

/** `1mb`, `5mb`, `64kb` as bytes (route body limits are written so). */
export function limitBytes(limit: string): number {
  const match = /^(\d+)(kb|mb)$/i.exec(limit);
  if (!match) throw new Error(`body limit ${limit} is not <n>kb or <n>mb`);
  return Number(match[1]) * (match[2]?.toLowerCase() === 'mb' ? 1024 * 1024 : 1024);
}

/** The request body as sent, undone of its Content-Encoding (gzip, deflate, br); any other is a 415. */
function decodedStream(request: IncomingMessage): { stream: Readable; stop: () => void } {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  const drain = (): void => void request.resume();
  if (encoding === 'identity') return { stream: request, stop: drain };
  const decoder = encoding === 'gzip' || encoding === 'deflate' ? createUnzip() : encoding === 'br' ? createBrotliDecompress() : undefined;
  if (!decoder)
    throw new ApiError(
      415,
      'unsupported media type',
      `Content-Encoding '${encoding}' is not supported: send identity, gzip, deflate or br.`,
    );
  // Not pipeline(): it would destroy the request (and its socket) with the decoder, leaving nothing to answer on.
  request.on('error', (error) => decoder.destroy(error));
  const stop = (): void => {
    request.unpipe(decoder);
    decoder.destroy();
    drain();
  };
  return { stream: request.pipe(decoder), stop };
}

/**
 * At most `limit` bytes of the (decoded) body; past it a 413 stating the limit, also where a small
 * compressed body inflates past it. Reading stops there: what is left of the request is drained.
 */
export async function readJsonBodyBytes(request: IncomingMessage, limit: string): Promise<Buffer> {
  const max = limitBytes(limit);
  const tooLarge = (): ApiError =>
    new ApiError(413, 'payload too large', `The request body is larger than this endpoint takes: at most ${limit}.`);
  const announced = Number(request.headers['content-length']);
  if (request.headers['content-encoding'] === undefined && Number.isFinite(announced) && announced > max) throw tooLarge();
  const { stream, stop } = decodedStream(request);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    // Not destroyed on the early exit (a 413): the request is drained instead, so its keep-alive connection lives on.
    for await (const chunk of stream.iterator({ destroyOnReturn: false })) {
      size += (chunk as Buffer).length;
      if (size > max) throw tooLarge();
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    stop();
    // A client that went away is answered by the error handler (499); corrupt compressed data is no JSON.
    if (error instanceof ApiError || abortedByClient(request, error) || stream === request) throw error;
    throw malformedJson();
  }
  return Buffer.concat(chunks);
}
