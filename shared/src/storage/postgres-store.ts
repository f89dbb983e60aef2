import { Readable } from 'node:stream';
import type { Pool } from 'pg';
import { copyOutOneValue } from './binary-copy.ts';
import { partsOf, type ObjectStore } from './object-store.ts';

/**
 * How much of an object one row holds. Small enough that a row is read and written in a moment (a
 * download of 50 MiB is 200 short queries, between which its connection serves others), large enough
 * that the rows' overhead is small.
 */
export const POSTGRES_CHUNK_BYTES = 256 * 1024;

/**
 * The embedded default: an object's bytes in `stored_object_chunks`, a chunk a row, each written and
 * read by its own statement. No connection is held between chunks, so a slow client (uploading or
 * downloading) never holds one, and 16 downloads wait in the pool's line with everyone else.
 */
export class PostgresObjectStore implements ObjectStore {
  readonly backend = 'postgres' as const;
  readonly #pool: Pool;
  readonly #chunkBytes: number;

  constructor(pool: Pool, chunkBytes = POSTGRES_CHUNK_BYTES) {
    this.#pool = pool;
    this.#chunkBytes = chunkBytes;
  }

  async write(key: string, source: AsyncIterable<Buffer>): Promise<void> {
    let seq = 0;
    for await (const part of partsOf(source, this.#chunkBytes)) {
      await this.#pool.query('insert into stored_object_chunks (object_key, seq, data) values ($1, $2, $3)', [key, seq, part]);
      seq += 1;
    }
  }

  read(key: string): Readable {
    const pool = this.#pool;
    async function* chunks(): AsyncGenerator<Buffer> {
      for (let seq = 0; ; seq += 1) {
        // Binary, not `select data`: node-postgres would decode the chunk from hex text on the event loop (binary-copy.ts).
        const chunk = await copyOutOneValue(
          pool,
          (literal) => `select data from stored_object_chunks where object_key = ${literal(key)} and seq = ${String(seq)}`,
        );
        if (!chunk) return;
        yield chunk;
      }
    }
    return Readable.from(chunks(), { objectMode: false, highWaterMark: 1 });
  }

  async remove(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.#pool.query('delete from stored_object_chunks where object_key = any($1::text[])', [keys]);
  }
}
