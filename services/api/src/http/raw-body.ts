import { ApiError } from '@runtasks/shared/errors';
import type { IncomingMessage } from 'node:http';

/** Reads a request body of at most `limit` bytes; more is a 413 (announced or not). */
export async function readRawBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = (): ApiError => new ApiError(413, 'payload too large', `The upload exceeds the limit of ${limit} bytes.`);
  const announced = Number(request.headers['content-length']);
  if (Number.isFinite(announced) && announced > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      request.resume();
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
