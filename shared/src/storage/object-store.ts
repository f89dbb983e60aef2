import type { Readable } from 'node:stream';

/**
 * Where stored objects' bytes live (STORAGE_BACKEND): PostgreSQL, a chunk a row, by default; an
 * S3-compatible bucket in production. Bytes only: what an object is, whose, how large and its SHA-256
 * are in `stored_objects` (objects.ts), whichever backend holds them. Every method streams: a write
 * holds at most one part of the object in memory, a read at most one part too (and no database
 * connection between parts).
 */
export interface ObjectStore {
  readonly backend: 'postgres' | 's3';
  /** Writes `source` under `key`, a part at a time; where `source` throws, rejects with its error (the caller removes the key). */
  write(key: string, source: AsyncIterable<Buffer>): Promise<void>;
  /** The object's bytes, as a stream read a part at a time as the consumer takes them. */
  read(key: string): Readable;
  /** Removes the objects' bytes; keys that hold nothing are no error. */
  remove(keys: readonly string[]): Promise<void>;
}

/**
 * Cuts `source` into parts of exactly `size` bytes (the last may be shorter), copying as little as it
 * can: at most one part is held.
 */
export async function* partsOf(source: AsyncIterable<Buffer>, size: number): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of source) {
    let rest = chunk;
    while (pendingBytes + rest.length >= size) {
      const take = size - pendingBytes;
      pending.push(rest.subarray(0, take));
      yield Buffer.concat(pending, size);
      rest = rest.subarray(take);
      pending = [];
      pendingBytes = 0;
    }
    if (rest.length > 0) {
      pending.push(rest);
      pendingBytes += rest.length;
    }
  }
  if (pendingBytes > 0) yield Buffer.concat(pending, pendingBytes);
}
