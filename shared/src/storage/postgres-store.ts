import { Readable } from 'node:stream';
import type { Pool } from 'pg';
import { copyOutPieces } from './binary-copy.ts';
import { partsOf, type ObjectStore } from './object-store.ts';

/**
 * How much of an object one row holds. Small enough that a row is read and written in a moment (a
 * download of 50 MiB is 200 short queries, between which its connection serves others), large enough
 * that the rows' overhead is small.
 */
export const POSTGRES_CHUNK_BYTES = 256 * 1024;

/**
 * How much of a chunk one row of its read holds: smaller than a socket read (64 KiB), so that
 * pg-protocol's parser never gathers a message larger than that (binary-copy.ts, `copyOutPieces`).
 */
export const POSTGRES_PIECE_BYTES = 16 * 1024;

/**
 * The statement that reads chunk `seq` of the object under `keyLiteral` as rows of `(total, offset,
 * piece)`. The chunk is detoasted once (`|| ''::bytea`, in a subquery kept apart by `offset 0`) and
 * then cut in memory: `substring` of a compressed stored value would decompress it from its start
 * again for every piece.
 */
export function piecesSelect(keyLiteral: string, seq: number, pieceBytes = POSTGRES_PIECE_BYTES): string {
  return (
    `select length(c.data), g.at - 1, substring(c.data from g.at for ${String(pieceBytes)}) ` +
    `from (select data || ''::bytea as data from stored_object_chunks where object_key = ${keyLiteral} and seq = ${String(seq)} offset 0) c, ` +
    `generate_series(1, greatest(length(c.data), 1), ${String(pieceBytes)}) g(at)`
  );
}

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
        // Binary, not `select data`: node-postgres would decode the chunk from hex text on the event loop;
        // in pieces, not whole: its parser would make five bytes of garbage of each (binary-copy.ts).
        const chunk = await copyOutPieces(pool, (literal) => piecesSelect(literal(key), seq));
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
