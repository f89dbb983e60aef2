/**
 * Extracting a configuration version safely: for a task that reads the run's configuration
 * (`configuration_version_download_url` in the payload, fetched with the payload's access token).
 *
 * The service stores archives as they were uploaded, so one may hold what `tar -x` would happily
 * write: `../` or absolute paths, links into `/etc`, devices, setuid bits, or a few kilobytes that
 * expand into gigabytes. This reader writes regular files and directories only, below `dir`, with
 * plain modes (0644, or 0755 for executables), within limits:
 *
 * - refused (the whole archive, `UnsafeArchiveError`): absolute paths, `..`, NUL in a name, a path
 *   written twice, a broken or truncated tar, more entries or bytes (decompressed) than the limits;
 * - left out (listed in `skipped`): symbolic and hard links, devices, FIFOs and other special entries;
 * - neutralised: setuid, setgid, sticky and group/other write bits are dropped.
 *
 * No dependencies: node:zlib and node:fs. Give it an empty directory of its own (e.g. `mkdtemp`):
 * nothing in it is then a link, so no write can be redirected.
 */
import { constants } from 'node:fs';
import { mkdir, open, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';

export interface ExtractLimits {
  /** Bytes after decompression, headers included (the service refuses archives beyond 10 × its upload limit). */
  maxBytes: number;
  maxEntries: number;
}

export const DEFAULT_EXTRACT_LIMITS: ExtractLimits = { maxBytes: 512 * 1024 * 1024, maxEntries: 20_000 };

export interface Extracted {
  /** Regular files written, relative to `dir`. */
  files: string[];
  skipped: { path: string; reason: string }[];
}

export class UnsafeArchiveError extends Error {
  constructor(message: string) {
    super(`unsafe or broken archive: ${message}`);
    this.name = 'UnsafeArchiveError';
  }
}

const BLOCK = 512;
const MAX_PAX_BYTES = 64 * 1024;
const SKIPPED: Record<string, string> = {
  '1': 'a hard link',
  '2': 'a symbolic link',
  '3': 'a character device',
  '4': 'a block device',
  '6': 'a FIFO',
};

/** Exact reads from the decompressed stream, counting every byte against the limit. */
class Reader {
  private rest: Buffer = Buffer.alloc(0);
  private total = 0;
  private readonly source: AsyncIterator<Buffer>;
  private readonly maxBytes: number;
  constructor(source: AsyncIterator<Buffer>, maxBytes: number) {
    this.source = source;
    this.maxBytes = maxBytes;
  }

  /** `length` bytes, or undefined at the end of the stream. */
  async read(length: number): Promise<Buffer | undefined> {
    while (this.rest.length < length) {
      const next = await this.source.next();
      if (next.done) {
        if (this.rest.length === 0) return undefined;
        throw new UnsafeArchiveError('it is truncated');
      }
      this.total += next.value.length;
      if (this.total > this.maxBytes) throw new UnsafeArchiveError(`it expands beyond ${this.maxBytes} bytes`);
      this.rest = this.rest.length === 0 ? next.value : Buffer.concat([this.rest, next.value]);
    }
    const taken = this.rest.subarray(0, length);
    this.rest = this.rest.subarray(length);
    return taken;
  }

  /** `length` bytes in pieces of at most 64 KiB, for contents. */
  async *pieces(length: number): AsyncGenerator<Buffer> {
    for (let left = length; left > 0;) {
      const piece = await this.read(Math.min(left, 64 * 1024));
      if (!piece) throw new UnsafeArchiveError('it is truncated');
      left -= piece.length;
      yield piece;
    }
  }
}

const text = (block: Buffer, start: number, length: number): string => {
  const field = block.subarray(start, start + length);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? length : end).toString('utf8');
};

function number(block: Buffer, start: number, length: number): number {
  const field = text(block, start, length).trim();
  if (!/^[0-7]*$/.test(field)) throw new UnsafeArchiveError('a header holds a number that is not octal');
  return field === '' ? 0 : parseInt(field, 8);
}

function checksumMatches(block: Buffer): boolean {
  let sum = 0;
  for (let index = 0; index < BLOCK; index += 1) sum += index >= 148 && index < 156 ? 0x20 : (block[index] as number);
  return sum === number(block, 148, 8);
}

/** `path=…` and `size=…` of a PAX extended header. */
function paxRecords(data: Buffer): { path?: string; size?: number } {
  const out: { path?: string; size?: number } = {};
  for (let at = 0; at < data.length;) {
    const space = data.indexOf(0x20, at);
    const length = Number(data.subarray(at, space).toString('latin1'));
    if (space === -1 || !Number.isInteger(length) || length <= 0 || at + length > data.length) {
      throw new UnsafeArchiveError('a PAX header is malformed');
    }
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const equals = record.indexOf('=');
    const key = record.slice(0, equals);
    if (key === 'path') out.path = record.slice(equals + 1);
    if (key === 'size') out.size = Number(record.slice(equals + 1));
    at += length;
  }
  if (out.size !== undefined && !(Number.isSafeInteger(out.size) && out.size >= 0))
    throw new UnsafeArchiveError('a PAX size is not a size');
  return out;
}

/** The path's segments below the target, or a refusal for one that could leave it. */
function safeSegments(path: string): string[] {
  if (path.includes('\0')) throw new UnsafeArchiveError(`${JSON.stringify(path)} holds a NUL`);
  if (path.startsWith('/')) throw new UnsafeArchiveError(`${JSON.stringify(path)} is absolute`);
  const segments = path.split('/').filter((segment) => segment !== '' && segment !== '.');
  if (segments.includes('..')) throw new UnsafeArchiveError(`${JSON.stringify(path)} goes up with ..`);
  return segments;
}

/** An entry landing on another (a file where a directory is, or the reverse) refuses the archive. */
async function collides<T>(path: string, operation: Promise<T>): Promise<T> {
  try {
    return await operation;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' || code === 'ENOTDIR' || code === 'EISDIR')
      throw new UnsafeArchiveError(`${JSON.stringify(path)} collides with another entry`);
    throw error;
  }
}

/** A new regular file: created here and now (O_EXCL), never through a link (O_NOFOLLOW), with only the owner's execute bit kept. */
async function writeFile(target: string, mode: number, content: AsyncIterable<Buffer>, path: string): Promise<void> {
  await collides(path, mkdir(dirname(target), { recursive: true, mode: 0o755 }));
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const file = await collides(path, open(target, flags, mode & 0o100 ? 0o755 : 0o644));
  try {
    for await (const piece of content) await file.write(piece);
  } finally {
    await file.close();
  }
}

/** Extracts a `.tar.gz` (its bytes, or a stream of them such as a fetch response's body) into the empty directory `dir`. */
export async function extractConfiguration(
  gzipped: Uint8Array | AsyncIterable<Uint8Array>,
  dir: string,
  limits: ExtractLimits = DEFAULT_EXTRACT_LIMITS,
): Promise<Extracted> {
  if ((await readdir(dir)).length > 0) throw new Error(`${dir} must be empty`);
  const gunzip = Readable.from(gzipped).pipe(createGunzip());
  const reader = new Reader(gunzip[Symbol.asyncIterator](), limits.maxBytes);
  const extracted: Extracted = { files: [], skipped: [] };
  const written = new Set<string>();
  let pending: { path?: string; size?: number } = {};
  try {
    for (let entries = 0; ; entries += 1) {
      const block = await reader.read(BLOCK);
      if (!block || block.every((byte) => byte === 0)) break;
      if (entries >= limits.maxEntries) throw new UnsafeArchiveError(`it holds more than ${limits.maxEntries} entries`);
      if (!checksumMatches(block)) throw new UnsafeArchiveError('a header checksum does not match (not a tar archive?)');
      const type = block[156] === 0 ? '0' : String.fromCharCode(block[156] as number);
      const prefix = block.subarray(257, 262).toString('latin1') === 'ustar' ? text(block, 345, 155) : '';
      const path = pending.path ?? (prefix ? `${prefix}/${text(block, 0, 100)}` : text(block, 0, 100));
      const size = pending.size ?? number(block, 124, 12);
      const padded = Math.ceil(size / BLOCK) * BLOCK;
      pending = {};
      if (type === 'x' || type === 'L') {
        if (size > MAX_PAX_BYTES) throw new UnsafeArchiveError('an extended header is too large');
        const data = ((await reader.read(padded)) ?? Buffer.alloc(0)).subarray(0, size);
        pending = type === 'x' ? paxRecords(data) : { path: text(data, 0, data.length) };
        continue;
      }
      const segments = safeSegments(path);
      const target = join(dir, ...segments);
      if (type === '0' || type === '7') {
        if (segments.length === 0 || written.has(target)) throw new UnsafeArchiveError(`${JSON.stringify(path)} is written twice`);
        written.add(target);
        await writeFile(target, number(block, 100, 8), reader.pieces(size), path);
        extracted.files.push(segments.join('/'));
        await reader.read(padded - size);
        continue;
      }
      if (type === '5' && segments.length > 0) await collides(path, mkdir(target, { recursive: true, mode: 0o755 }));
      else if (type !== '5' && type !== 'g')
        extracted.skipped.push({ path, reason: `${SKIPPED[type] ?? `an entry of type ${JSON.stringify(type)}`}, left out` });
      for await (const piece of reader.pieces(padded)) void piece;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'Z_DATA_ERROR' || (error as NodeJS.ErrnoException).code === 'Z_BUF_ERROR') {
      throw new UnsafeArchiveError('it is not gzip data');
    }
    throw error;
  } finally {
    gunzip.destroy();
  }
  return extracted;
}
