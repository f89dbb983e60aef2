import { createHash } from 'node:crypto';
import { ApiError } from '@runtasks/shared/errors';
import {
  objectStoreFor,
  openObject,
  putObject,
  readWhole,
  removeObjects,
  type ObjectOwner,
  type PutResult,
} from '@runtasks/shared/storage';
import type { Pool } from 'pg';
import { poolOf, type ApiContext } from '../context.ts';
import { describeBytes, type BodyLimit } from '../http/raw-body.ts';
import { noteStreamed } from '../ops/young-garbage.ts';

/** The 413 of a body past its limit, naming the limit and its setting. */
export function bodyTooLarge(limit: number, body: BodyLimit): ApiError {
  return new ApiError(
    413,
    'payload too large',
    `${body.what} is larger than this service takes: at most ${describeBytes(limit)}, set by ${body.setting}.`,
    undefined,
    {},
    { 'limit-bytes': limit },
  );
}

/**
 * Streams the request's body into storage (shared/src/storage, putObject): never held whole, its size
 * limit and the organization's quota enforced as bytes arrive, its SHA-256 computed on the way. Where
 * it is refused part way (413, the inspection's error), the rest of the body is read and dropped so
 * the answer reaches the client, and the connection is closed after it; nothing stays stored.
 */
export async function storeRequestBody(
  ctx: ApiContext,
  owner: ObjectOwner,
  maxBytes: number,
  body: BodyLimit,
  inspect?: (chunk: Buffer) => Promise<void> | void,
): Promise<PutResult> {
  const pool = await poolOf(ctx);
  const announced = Number(ctx.req.headers['content-length']);
  // Not destroyed when the loop stops early: destroying the request would reset the connection before the 413 is sent.
  const request = ctx.req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>;
  // Counted for the scavenges that keep its garbage from piling up (young-garbage.ts).
  async function* source(): AsyncGenerator<Buffer> {
    for await (const chunk of request) {
      noteStreamed(chunk.length);
      yield chunk;
    }
  }
  try {
    return await putObject(pool, objectStoreFor(pool, ctx.deps.config.storage), owner, source(), {
      maxBytes,
      tooLarge: () => bodyTooLarge(maxBytes, body),
      quotaBytes: ctx.deps.config.storage.quotaBytes,
      ...(Number.isFinite(announced) && { announcedBytes: announced }),
      ...(inspect && { inspect }),
    });
  } catch (error) {
    if (!ctx.req.complete) {
      ctx.set('Connection', 'close');
      ctx.req.resume();
    }
    throw error;
  }
}

/** Removes stored objects that did not become what they were stored for. */
export async function discardObjects(ctx: ApiContext, keys: readonly (string | null | undefined)[]): Promise<void> {
  const pool = await poolOf(ctx);
  await removeObjects(
    pool,
    objectStoreFor(pool, ctx.deps.config.storage),
    keys.filter((key): key is string => typeof key === 'string'),
  );
}

/** A stored object's bytes, whole: for the one place that parses them (a plan report being taken, once). */
export async function readStored(ctx: ApiContext, key: string): Promise<Buffer> {
  const pool = await poolOf(ctx);
  const object = await openObject(pool, objectStoreFor(pool, ctx.deps.config.storage), key);
  if (!object) throw new ApiError(409, 'conflict', 'The reported plan was removed while it was being taken; report it again.');
  return readWhole(object.body());
}

/** The stored bytes are gone: retention removed them (STORAGE_RETENTION_DAYS). */
export const removedByRetention = (what: string): ApiError =>
  new ApiError(
    410,
    'gone',
    `${what} was removed: archives and plans of finished runs are kept for STORAGE_RETENTION_DAYS, and this one is older.`,
  );

/** `"<sha256>"`: the strong ETag of stored bytes. */
export const etagOf = (sha256: string): string => `"${sha256}"`;

/** Whether the request's If-None-Match names `etag` (or is `*`): then the client has these bytes. */
export function clientHas(ctx: ApiContext, etag: string): boolean {
  const header = ctx.get('If-None-Match');
  if (!header) return false;
  return header.split(',').some((tag) => {
    const value = tag.trim().replace(/^W\//, '');
    return value === '*' || value === etag;
  });
}

/** Sets the ETag of `sha256`, and answers 304 where the client has those bytes: whether it did. */
function answeredByEtag(ctx: ApiContext, sha256: string): boolean {
  const etag = etagOf(sha256);
  ctx.set('ETag', etag);
  ctx.set('Cache-Control', 'private, no-cache');
  if (!clientHas(ctx, etag)) return false;
  ctx.status = 304;
  return true;
}

/** Answers with bytes in memory (small ones), as sendObject does stored ones. */
export function sendBytes(ctx: ApiContext, bytes: Buffer, type: string): void {
  if (answeredByEtag(ctx, createHash('sha256').update(bytes).digest('hex'))) return;
  ctx.status = 200;
  ctx.type = type;
  ctx.body = bytes;
}

/**
 * Answers with a stored object's bytes as they are stored, streamed a part at a time (no database
 * connection held between parts), with their ETag; 304 where the client has them. False where the
 * object is gone (the caller says why).
 */
export async function sendObject(ctx: ApiContext, key: string, type: string, pool?: Pool): Promise<boolean> {
  const db = pool ?? (await poolOf(ctx));
  const object = await openObject(db, objectStoreFor(db, ctx.deps.config.storage), key);
  if (!object) return false;
  if (answeredByEtag(ctx, object.sha256)) return true;
  ctx.status = 200;
  ctx.type = type;
  ctx.body = object.body();
  ctx.length = object.size;
  return true;
}
