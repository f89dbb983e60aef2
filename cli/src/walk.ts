import { type Dirent, type Stats } from 'node:fs';
import { access, constants, lstat, readdir, readlink } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { judge, reincludeBelow, rootScope, type DirectoryScope, type IgnoreRule } from './ignore.ts';
import { tarBytes, type TarEntry } from './tar.ts';

/**
 * The walk of a configuration directory: what goes into its archive, and every entry that cannot, by
 * path. It lists a directory that `.terraformignore` leaves out only while a later `!` rule could still
 * bring back something inside it, and then stats nothing it leaves out. Nothing is read here but
 * directory listings and link targets; file contents are streamed later (archive.ts), and only from
 * regular files.
 */
export interface WalkedEntry extends TarEntry {
  absolute: string;
}

/** An entry that cannot go into the archive, and why. */
export interface Problem {
  path: string;
  reason: string;
}

export interface Walk {
  entries: WalkedEntry[];
  problems: Problem[];
  /** The archive's size before compression: headers and padded contents. */
  tarBytes: number;
  /** The walk stopped once the archive would pass this many bytes uncompressed. */
  overLimit: boolean;
  /** The largest files seen, for the message when the archive is too large. */
  largest: WalkedEntry[];
}

const LARGEST_KEPT = 3;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true });

/** Invalid UTF-8 and control characters as `\xNN`, so that a path is always one printable line. */
export function printable(name: Buffer | string): string {
  const escaped = (code: number): string => `\\x${code.toString(16).padStart(2, '0')}`;
  let out = '';
  if (typeof name === 'string') {
    for (const char of name) out += char < ' ' || char === '\x7f' ? escaped(char.charCodeAt(0)) : char;
  } else {
    for (const byte of name) out += byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : escaped(byte);
  }
  return out;
}

function decode(name: Buffer): string | undefined {
  try {
    return STRICT_UTF8.decode(name);
  } catch {
    return undefined;
  }
}

/** What a special file is, in words. */
export function specialKind(info: Pick<Stats, 'isFIFO' | 'isSocket' | 'isCharacterDevice' | 'isBlockDevice'>): string {
  if (info.isFIFO()) return 'a FIFO (named pipe)';
  if (info.isSocket()) return 'a socket';
  if (info.isCharacterDevice()) return 'a character device';
  if (info.isBlockDevice()) return 'a block device';
  return 'neither a file, a directory nor a symlink';
}

/** An fs error's reason in a few words. */
export function reasonOf(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'ENOENT') return 'it disappeared while the configuration was read';
  if (code === 'ELOOP') return 'too many levels of symbolic links';
  if (code === 'EIO') return 'input/output error';
  return code ?? (error as Error).message;
}

/**
 * Walks `base` (a real path) with `rules`; stops early once the archive would pass `maxTarBytes`
 * uncompressed, so that a huge tree is never held as a list.
 */
export async function walkConfiguration(base: string, rules: readonly IgnoreRule[], maxTarBytes: number): Promise<Walk> {
  const walk: Walk = { entries: [], problems: [], tarBytes: 0, overLimit: false, largest: [] };
  const problem = (path: string, reason: string): void => void walk.problems.push({ path: printable(path), reason });

  function add(entry: WalkedEntry): void {
    walk.entries.push(entry);
    walk.tarBytes += tarBytes(entry);
    if (entry.type === 'file') {
      walk.largest = [...walk.largest, entry].sort((a, b) => b.size - a.size).slice(0, LARGEST_KEPT);
    }
    if (walk.tarBytes > maxTarBytes) walk.overLimit = true;
  }

  async function list(absolute: string, path: string, listedFor: IgnoreRule | undefined): Promise<Dirent<Buffer>[] | undefined> {
    try {
      return await readdir(absolute, { withFileTypes: true, encoding: 'buffer' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && path !== '.') return undefined;
      const why = listedFor
        ? `; it is left out, but ${JSON.stringify(listedFor.text)} (.terraformignore line ${listedFor.line}) could bring back something inside it`
        : '';
      problem(`${path}/`, `cannot be listed (${reasonOf(error)})${why}`);
      return undefined;
    }
  }

  async function visit(absolute: string, path: string, scope: DirectoryScope, listedFor: IgnoreRule | undefined): Promise<void> {
    const dirents = await list(absolute, path, listedFor);
    if (!dirents) return;
    const named = dirents.map((dirent) => ({ dirent, name: decode(dirent.name) })).sort(byName);
    for (const { dirent, name } of named) {
      if (walk.overLimit) return;
      const isDirectory = dirent.isDirectory();
      // A name that is not UTF-8 is judged as Terraform's Go would see it (with U+FFFD for the bad bytes).
      const verdict = judge(rules, scope, name ?? dirent.name.toString('utf8'), isDirectory);
      const inside = verdict.scope;
      const reinclude = isDirectory && inside ? reincludeBelow(rules, inside) : undefined;
      if (verdict.ignored && !reinclude) continue;
      if (name === undefined) {
        walk.problems.push({
          path: `${path === '.' ? '' : `${printable(path)}/`}${printable(dirent.name)}`,
          reason: 'has a name that is not UTF-8',
        });
        continue;
      }
      const childPath = path === '.' ? name : `${path}/${name}`;
      if (verdict.ignored) await visit(join(absolute, name), childPath, inside as DirectoryScope, reinclude);
      else await include(join(absolute, name), childPath, isDirectory, inside);
    }
  }

  async function include(absolute: string, path: string, isDirectory: boolean, inside: DirectoryScope | undefined): Promise<void> {
    let info: Stats;
    try {
      info = await lstat(absolute);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') problem(path, `cannot be read (${reasonOf(error)})`);
      return;
    }
    if (info.isDirectory() !== isDirectory) {
      problem(path, 'changed while the configuration was read');
    } else if (isDirectory) {
      await visit(absolute, path, inside as DirectoryScope, undefined);
    } else if (info.isSymbolicLink()) {
      await includeLink(absolute, path, info);
    } else if (info.isFile()) {
      try {
        await access(absolute, constants.R_OK);
        add({ path, absolute, type: 'file', mode: info.mode & 0o777, mtime: info.mtime, size: info.size });
      } catch (error) {
        problem(path, `cannot be read (${reasonOf(error)})`);
      }
    } else {
      problem(path, `is ${specialKind(info)}, which a configuration cannot hold (only files, directories and symlinks)`);
    }
  }

  async function includeLink(absolute: string, path: string, info: Stats): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readlink(absolute, { encoding: 'buffer' });
    } catch (error) {
      problem(path, `cannot be read (${reasonOf(error)})`);
      return;
    }
    const target = decode(raw);
    if (target === undefined) {
      problem(path, `links to ${printable(raw)}, which is not UTF-8`);
      return;
    }
    const resolved = resolve(dirname(absolute), target);
    if (resolved !== base && !resolved.startsWith(base + sep)) {
      problem(path, `links outside the configuration directory (${printable(target)}); Terraform would refuse it too`);
      return;
    }
    add({ path, absolute, type: 'symlink', mode: 0o777, mtime: info.mtime, size: 0, linkTarget: target });
  }

  await visit(base, '.', rootScope(rules), undefined);
  return walk;
}

/** A stable order: by name as JavaScript compares strings, bad names by their bytes after the good ones. */
function byName(a: { name: string | undefined; dirent: Dirent<Buffer> }, b: { name: string | undefined; dirent: Dirent<Buffer> }): number {
  if (a.name !== undefined && b.name !== undefined) return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
  if (a.name !== undefined) return -1;
  if (b.name !== undefined) return 1;
  return Buffer.compare(a.dirent.name, b.dirent.name);
}
