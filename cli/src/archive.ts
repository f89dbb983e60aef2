import { constants } from 'node:fs';
import { lstat, open, realpath, type FileHandle } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { CliError } from './exit-codes.ts';
import { parseIgnoreFile } from './ignore.ts';
import { headerOf, padding, TAR_END } from './tar.ts';
import { printable, reasonOf, specialKind, walkConfiguration, type Problem, type WalkedEntry } from './walk.ts';

/**
 * The configuration directory as a `.tar.gz`, as Terraform uploads one: regular files and symlinks that
 * stay inside the directory, relative paths, `.terraformignore` honoured. Every entry that cannot go in
 * (unreadable, special, a name that is not UTF-8, a link leaving the directory) is reported by path
 * before anything is sent. The archive's size is checked against the service's limit before compressing
 * (the sum of what would go in) and while compressing; contents are streamed in small chunks, so memory
 * stays bounded by the limit whatever the files' sizes.
 */

export interface ArchiveLimits {
  /** The largest compressed archive the service takes: its CONFIGURATION_VERSION_MAX_BYTES. */
  maxBytes: number;
}

/** The service's default CONFIGURATION_VERSION_MAX_BYTES. */
export const DEFAULT_MAX_ARCHIVE_BYTES = 50 * 1024 * 1024;
/** The service refuses an archive that expands beyond this multiple of its limit. */
export const EXPANSION_LIMIT = 10;
/** A list of patterns has no business being larger; read no further than this. */
export const IGNORE_FILE_MAX_BYTES = 1024 * 1024;
const MAX_LIMIT = 1024 * 1024 * 1024;
const READ_CHUNK = 64 * 1024;
const PROBLEMS_SHOWN = 10;

/** `RUNTASKS_MAX_ARCHIVE_BYTES` (for a service whose CONFIGURATION_VERSION_MAX_BYTES is not the default), or the default. */
export function archiveLimitsFrom(env: Record<string, string | undefined>): ArchiveLimits {
  const raw = env['RUNTASKS_MAX_ARCHIVE_BYTES'];
  if (raw === undefined || raw === '') return { maxBytes: DEFAULT_MAX_ARCHIVE_BYTES };
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1024 || value > MAX_LIMIT) {
    throw new CliError('usage', `RUNTASKS_MAX_ARCHIVE_BYTES must be a number of bytes between 1024 and ${MAX_LIMIT}, not "${raw}"`);
  }
  return { maxBytes: value };
}

export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/**
 * The `.terraformignore` at the root, read without ever blocking or reading much: opened non-blocking
 * (a FIFO does not wait for a writer), checked to be a regular file (a link to `/dev/zero` is refused
 * unread) inside the directory, and read up to IGNORE_FILE_MAX_BYTES.
 */
export async function readIgnoreFile(base: string): Promise<string> {
  const path = join(base, '.terraformignore');
  const refuse = (why: string): CliError => new CliError('usage', `cannot use ${path}: ${why}`);
  try {
    if ((await lstat(path)).isSymbolicLink()) {
      const target = await realpath(path);
      if (!target.startsWith(base + sep)) throw refuse(`it links outside the configuration directory (${printable(target)})`);
    }
  } catch (error) {
    if (error instanceof CliError) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return '';
    throw refuse(reasonOf(error));
  }
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw refuse(reasonOf(error));
  }
  try {
    const info = await handle.stat();
    if (!info.isFile())
      throw refuse(`it is ${info.isDirectory() ? 'a directory' : specialKind(info)}, not a regular file; nothing was read from it`);
    const limit = `more than the ${formatBytes(IGNORE_FILE_MAX_BYTES)} a list of patterns may take`;
    if (info.size > IGNORE_FILE_MAX_BYTES) throw refuse(`it is ${formatBytes(info.size)}, ${limit}`);
    const buffer = Buffer.alloc(IGNORE_FILE_MAX_BYTES + 1);
    let length = 0;
    for (let read = -1; read !== 0 && length < buffer.length; length += read) {
      ({ bytesRead: read } = await handle.read(buffer, length, buffer.length - length, null));
    }
    if (length > IGNORE_FILE_MAX_BYTES) throw refuse(`it holds ${limit}`);
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(buffer.subarray(0, length));
    } catch {
      throw refuse('it is not UTF-8 text');
    }
  } catch (error) {
    throw error instanceof CliError ? error : refuse(reasonOf(error));
  } finally {
    await handle.close();
  }
}

function problemsError(dir: string, problems: readonly Problem[]): CliError {
  const shown = problems.slice(0, PROBLEMS_SHOWN).map((problem) => `${problem.path} ${problem.reason}`);
  const more = problems.length > PROBLEMS_SHOWN ? `; and ${problems.length - PROBLEMS_SHOWN} more` : '';
  const count = problems.length === 1 ? 'an entry' : `${problems.length} entries`;
  return new CliError(
    'usage',
    `cannot archive ${dir}: ${count} cannot go into the configuration: ${shown.join('; ')}${more}. Leave them out with .terraformignore, or fix them`,
  );
}

function tooLargeError(dir: string, limits: ArchiveLimits, what: string): CliError {
  return new CliError(
    'usage',
    `the configuration in ${dir} is too large for the service: ${what}; the service takes ${formatBytes(limits.maxBytes)} ` +
      `(${formatBytes(limits.maxBytes * EXPANSION_LIMIT)} once decompressed). Leave large files out with .terraformignore, ` +
      'or set RUNTASKS_MAX_ARCHIVE_BYTES to the service’s CONFIGURATION_VERSION_MAX_BYTES if it was raised',
  );
}

/** A regular file's first `size` bytes, in chunks; it must still be a regular file, at least that long. */
async function* contentOf(entry: WalkedEntry): AsyncGenerator<Buffer> {
  const cannot = (why: string): CliError => new CliError('usage', `cannot archive ${printable(entry.path)}: ${why}`);
  let handle: FileHandle;
  try {
    // Non-blocking and not through a link: a file swapped for a FIFO or a link since the walk is refused, not waited on.
    handle = await open(entry.absolute, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw cannot(reasonOf(error));
  }
  try {
    if (!(await handle.stat()).isFile()) throw cannot('it changed into something that is not a file while the configuration was read');
    for (let left = entry.size; left > 0;) {
      const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK, left));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) throw cannot('it became shorter while the configuration was read');
      left -= bytesRead;
      yield chunk.subarray(0, bytesRead);
    }
  } catch (error) {
    throw error instanceof CliError ? error : cannot(reasonOf(error));
  } finally {
    await handle.close();
  }
}

async function* tarStream(entries: readonly WalkedEntry[]): AsyncGenerator<Buffer> {
  for (const entry of entries) {
    yield headerOf(entry);
    if (entry.type !== 'file' || entry.size === 0) continue;
    yield* contentOf(entry);
    yield padding(entry.size);
  }
  yield TAR_END;
}

/**
 * `dir` as a `.tar.gz` honouring its `.terraformignore`, with how many files went in. Limits default to
 * RUNTASKS_MAX_ARCHIVE_BYTES, else the service's default.
 */
export async function archiveDirectory(
  dir: string,
  limits: ArchiveLimits = archiveLimitsFrom(process.env),
): Promise<{ archive: Buffer; files: number }> {
  let base: string;
  try {
    if (!(await lstat(dir)).isDirectory()) throw new CliError('usage', `${dir} is not a directory`);
    base = await realpath(dir);
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError('usage', `the configuration directory ${dir} does not exist`);
  }
  const rules = parseIgnoreFile(await readIgnoreFile(base));
  const maxTarBytes = limits.maxBytes * EXPANSION_LIMIT;
  const walk = await walkConfiguration(base, rules, maxTarBytes);
  if (walk.overLimit) {
    const largest = walk.largest.map((entry) => `${printable(entry.path)} (${formatBytes(entry.size)})`).join(', ');
    throw tooLargeError(dir, limits, `more than ${formatBytes(maxTarBytes)} before compression${largest ? ` (largest: ${largest})` : ''}`);
  }
  if (walk.problems.length > 0) throw problemsError(dir, walk.problems);
  const chunks: Buffer[] = [];
  let compressed = 0;
  await pipeline(tarStream(walk.entries), createGzip(), async (source: AsyncIterable<Buffer>) => {
    for await (const chunk of source) {
      compressed += chunk.length;
      if (compressed > limits.maxBytes) throw tooLargeError(dir, limits, `more than ${formatBytes(limits.maxBytes)} compressed`);
      chunks.push(chunk);
    }
  });
  return { archive: Buffer.concat(chunks, compressed), files: walk.entries.length };
}
