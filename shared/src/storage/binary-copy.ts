import type { Pool, PoolClient } from 'pg';

/**
 * Reads one `bytea` value as the bytes PostgreSQL holds, without node-postgres's text decoding.
 *
 * Why: a `select data` answers `bytea` in text format (hex, twice the bytes), which node-postgres turns
 * into a string and then decodes on the event loop: per 256 KiB chunk some 1.5–2 ms of the API's CPU
 * (bench/NOTES.md, 2026-11-27). Its binary result mode does not help: it decodes every field as UTF-8
 * first (pg-protocol's DataRow parser), which mangles arbitrary bytes. `COPY (select …) TO STDOUT
 * (FORMAT binary)` does: its CopyData messages reach us as raw buffers, and the one value is cut out
 * of the binary COPY framing (about 0.75 ms per chunk, measured the same way).
 *
 * COPY takes no parameters, so the statement is written with `escapeLiteral`; callers pass only
 * values of their own (object keys, sequence numbers).
 */
export async function copyOutOneValue(
  pool: Pool,
  selectOneColumn: (literal: (value: string) => string) => string,
): Promise<Buffer | undefined> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    const copy = new CopyOutQuery(`copy (${selectOneColumn((value) => client.escapeLiteral(value))}) to stdout (format binary)`);
    // pg runs any object with `submit` as a query (its "Submittable"): pg-cursor and pg-copy-streams use the same door.
    (client as PoolClient & { query(submittable: CopyOutQuery): CopyOutQuery }).query(copy);
    return firstValue(await copy.done);
  } catch (error) {
    // An error of the connection (not of the statement) leaves it unusable: dropped rather than returned to the pool.
    if (!(error instanceof DatabaseError)) broken = error as Error;
    throw error instanceof DatabaseError ? error.cause : error;
  } finally {
    client.release(broken);
  }
}

/** An error PostgreSQL answered for the statement: the connection is still good. */
class DatabaseError extends Error {}

/** The part of pg's connection a Submittable talks to. */
interface Connection {
  query(text: string): void;
}

/** A simple-protocol COPY TO STDOUT as a pg Submittable: collects the CopyData messages until ReadyForQuery. */
class CopyOutQuery {
  readonly #text: string;
  readonly #parts: Buffer[] = [];
  #error: Error | undefined;
  #resolve!: (bytes: Buffer) => void;
  #reject!: (error: Error) => void;
  readonly done = new Promise<Buffer>((resolve, reject) => {
    this.#resolve = resolve;
    this.#reject = reject;
  });

  constructor(text: string) {
    this.#text = text;
  }

  submit(connection: Connection): void {
    connection.query(this.#text);
  }

  handleCopyData(message: { chunk: Buffer }): void {
    // A copy: the parser's buffer is reused for later messages.
    this.#parts.push(Buffer.from(message.chunk));
  }

  handleError(error: Error): void {
    // Errors of the statement arrive as messages (then ReadyForQuery follows); a connection error ends it here.
    if ('severity' in error) this.#error = new DatabaseError(error.message, { cause: error });
    else this.#reject(error);
  }

  handleReadyForQuery(): void {
    if (this.#error) this.#reject(this.#error);
    else this.#resolve(joinedAsNeeded(this.#parts));
  }

  // The rest of the protocol's answers carry nothing for a COPY TO STDOUT.
  handleCopyOutResponse(): void {}
  handleCommandComplete(): void {}
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
}

/**
 * The COPY's messages as one buffer, without copying them again where the first message already holds
 * the header and the whole first row, as PostgreSQL sends them (a CopyData a row; the trailer apart):
 * one copy of each chunk's bytes less, and less garbage per download (bench/NOTES.md, 2026-11-28).
 */
export function joinedAsNeeded(parts: readonly Buffer[]): Buffer {
  const [first] = parts;
  if (parts.length === 1 && first) return first;
  if (first && holdsFirstRow(first)) return first;
  return Buffer.concat(parts);
}

/** Whether `copy` holds the binary COPY's header and its first row whole (or says there is no row). */
function holdsFirstRow(copy: Buffer): boolean {
  if (copy.length < 19) return false;
  const headerEnd = 19 + copy.readUInt32BE(15);
  if (copy.length < headerEnd + 2) return false;
  const fields = copy.readInt16BE(headerEnd);
  if (fields === -1) return true;
  if (copy.length < headerEnd + 6) return false;
  const length = copy.readInt32BE(headerEnd + 2);
  return length === -1 || copy.length >= headerEnd + 6 + length;
}

/**
 * The first column of the first row of a binary COPY (PostgreSQL's "Binary Format": an 11-byte
 * signature, flags, a header extension, then per row a field count and each field's length and
 * bytes, and -1 as the trailer); undefined where there is no row.
 */
export function firstValue(copy: Buffer): Buffer | undefined {
  const signature = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
  if (copy.length < 21 || !copy.subarray(0, 11).equals(signature)) throw new Error('not a binary COPY');
  let offset = 15;
  offset += 4 + copy.readUInt32BE(offset);
  const fields = copy.readInt16BE(offset);
  offset += 2;
  if (fields === -1) return undefined;
  const length = copy.readInt32BE(offset);
  offset += 4;
  if (length === -1) return undefined;
  return copy.subarray(offset, offset + length);
}
