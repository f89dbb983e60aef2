import type { Pool, PoolClient } from 'pg';
import { guardCheckedOut } from '../db/prepared.ts';

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
  const parts: Buffer[] = [];
  // A copy: the parser's buffer is reused for later messages.
  await copyOut(pool, selectOneColumn, (message) => parts.push(Buffer.from(message)));
  return firstValue(joinedAsNeeded(parts));
}

/**
 * Reads one `bytea` value from rows of its pieces, `(total int4, offset int4, piece bytea)` (see
 * `piecesSelect` in postgres-store.ts), copying each piece's bytes once, as its message arrives, into the one buffer of the value.
 *
 * Why pieces: pg-protocol's parser gathers each message whole in a buffer that doubles as a read
 * of the socket adds to it, and drops it when a statement's answer is consumed. One 256 KiB value is
 * one message: a fresh 256 KiB and 512 KiB buffer per chunk read, and then our copy of it, so some
 * five bytes of garbage per byte served, which at 140 MiB/s kept the API's RSS 130 MiB up
 * (bench/NOTES.md, 2026-11-28). Pieces of 16 KiB are messages smaller than a socket read: the
 * parser keeps one buffer of at most 128 KiB for the statement, and the value is copied once.
 */
export async function copyOutPieces(pool: Pool, selectPieces: (literal: (value: string) => string) => string): Promise<Buffer | undefined> {
  const assembler = new PiecesAssembler();
  await copyOut(pool, selectPieces, (message) => assembler.add(message));
  return assembler.value();
}

/** Runs `COPY (<select>) TO STDOUT (FORMAT binary)`, each CopyData message's bytes to `consume` as it arrives (valid only during the call). */
async function copyOut(
  pool: Pool,
  select: (literal: (value: string) => string) => string,
  consume: (message: Buffer) => void,
): Promise<void> {
  const client = await pool.connect();
  const unguard = guardCheckedOut(client);
  let broken: Error | undefined;
  try {
    const copy = new CopyOutQuery(`copy (${select((value) => client.escapeLiteral(value))}) to stdout (format binary)`, consume);
    // pg runs any object with `submit` as a query (its "Submittable"): pg-cursor and pg-copy-streams use the same door.
    (client as PoolClient & { query(submittable: CopyOutQuery): CopyOutQuery }).query(copy);
    await copy.done;
  } catch (error) {
    // An error of the connection (not of the statement or of its bytes) leaves it unusable: dropped rather than returned to the pool.
    if (!(error instanceof DatabaseError) && !(error instanceof FramingError)) broken = error as Error;
    throw error instanceof DatabaseError ? error.cause : error;
  } finally {
    unguard();
    client.release(broken);
  }
}

/** An error PostgreSQL answered for the statement: the connection is still good. */
class DatabaseError extends Error {}

/** Bytes of a COPY that are not what was asked for: the statement's fault, the connection is still good. */
class FramingError extends Error {}

/** The part of pg's connection a Submittable talks to. */
interface Connection {
  query(text: string): void;
}

/** A simple-protocol COPY TO STDOUT as a pg Submittable: hands over each CopyData message until ReadyForQuery. */
class CopyOutQuery {
  readonly #text: string;
  readonly #consume: (message: Buffer) => void;
  #error: Error | undefined;
  #resolve!: () => void;
  #reject!: (error: Error) => void;
  readonly done = new Promise<void>((resolve, reject) => {
    this.#resolve = resolve;
    this.#reject = reject;
  });

  constructor(text: string, consume: (message: Buffer) => void) {
    this.#text = text;
    this.#consume = consume;
  }

  submit(connection: Connection): void {
    connection.query(this.#text);
  }

  handleCopyData(message: { chunk: Buffer }): void {
    if (this.#error) return;
    // Thrown here it would surface in pg's message handling: kept for ReadyForQuery, which still comes.
    try {
      this.#consume(message.chunk);
    } catch (error) {
      this.#error = new FramingError((error as Error).message);
    }
  }

  handleError(error: Error): void {
    // Errors of the statement arrive as messages (then ReadyForQuery follows); a connection error ends it here.
    if ('severity' in error) this.#error = new DatabaseError(error.message, { cause: error });
    else this.#reject(error);
  }

  handleReadyForQuery(): void {
    if (this.#error) this.#reject(this.#error);
    else this.#resolve();
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

/**
 * Assembles one `bytea` value from the binary COPY of its pieces: rows of (total int4, offset int4,
 * piece bytea), as PostgreSQL frames them (an 11-byte signature, flags, a header extension, then per
 * row a field count and each field's length and bytes, and -1 as the trailer). Each CopyData message
 * is consumed as it arrives: the pieces' bytes are copied once, straight into the value's buffer.
 */
export class PiecesAssembler {
  /** The fixed-width field being collected, split across messages at most into a few bytes. */
  readonly #scratch = Buffer.alloc(19);
  #have = 0;
  #state: 'header' | 'extension' | 'fields' | 'length' | 'integer' | 'piece' | 'trailer' = 'header';
  #skip = 0;
  #field = 0;
  #pieceLeft = 0;
  #position = 0;
  #filled = 0;
  #value: Buffer | undefined;

  /** Consumes one CopyData message's bytes (read before the caller's buffer is reused). */
  add(message: Buffer): void {
    let at = 0;
    while (at < message.length) {
      if (this.#state === 'extension') {
        const skipped = Math.min(this.#skip, message.length - at);
        at += skipped;
        this.#skip -= skipped;
        if (this.#skip === 0) this.#state = 'fields';
        continue;
      }
      if (this.#state === 'piece') {
        const value = this.#value as Buffer;
        const taken = Math.min(this.#pieceLeft, message.length - at);
        message.copy(value, this.#position, at, at + taken);
        at += taken;
        this.#position += taken;
        this.#pieceLeft -= taken;
        this.#filled += taken;
        if (this.#pieceLeft === 0) this.#state = 'fields';
        continue;
      }
      if (this.#state === 'trailer') throw new Error('bytes after the binary COPY trailer');
      const need = this.#state === 'header' ? 19 : this.#state === 'fields' ? 2 : 4;
      const taken = Math.min(need - this.#have, message.length - at);
      message.copy(this.#scratch, this.#have, at, at + taken);
      at += taken;
      this.#have += taken;
      if (this.#have === need) {
        this.#have = 0;
        this.#fixed();
      }
    }
  }

  /** A fixed-width part is whole in the scratch buffer: what it says, and what comes next. */
  #fixed(): void {
    const scratch = this.#scratch;
    switch (this.#state) {
      case 'header':
        if (!scratch.subarray(0, 11).equals(SIGNATURE)) throw new Error('not a binary COPY');
        this.#skip = scratch.readUInt32BE(15);
        this.#state = this.#skip > 0 ? 'extension' : 'fields';
        return;
      case 'fields': {
        const fields = scratch.readInt16BE(0);
        if (fields === -1) this.#state = 'trailer';
        else if (fields !== 3) throw new Error(`a piece row has ${fields} fields, not 3`);
        else {
          this.#field = 0;
          this.#state = 'length';
        }
        return;
      }
      case 'length': {
        const length = scratch.readInt32BE(0);
        if (this.#field < 2) {
          if (length !== 4) throw new Error("a piece row's total and offset are int4");
          this.#state = 'integer';
          return;
        }
        const value = this.#value as Buffer;
        if (length < 0 || this.#position + length > value.length) throw new Error('a piece lies outside its value');
        this.#pieceLeft = length;
        this.#state = length > 0 ? 'piece' : 'fields';
        return;
      }
      case 'integer': {
        const number = scratch.readInt32BE(0);
        if (this.#field === 0) {
          if (this.#value === undefined) this.#value = Buffer.allocUnsafe(number);
          else if (this.#value.length !== number) throw new Error("the pieces disagree on their value's length");
        } else this.#position = number;
        this.#field += 1;
        this.#state = 'length';
        return;
      }
      default:
        throw new Error(`unexpected state ${this.#state}`);
    }
  }

  /** The value, once the COPY ended: undefined where it had no row. */
  value(): Buffer | undefined {
    if (this.#state !== 'trailer') throw new Error('the binary COPY ended early');
    if (this.#value && this.#filled !== this.#value.length) throw new Error('the pieces do not cover their value');
    return this.#value;
  }
}

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
