import { lstat, readdir, readFile, readlink, realpath } from 'node:fs/promises';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import { CliError } from './exit-codes.ts';
import { isIgnored, mayReinclude, parseIgnoreFile, type IgnoreRule } from './ignore.ts';

/**
 * The configuration directory as a `.tar.gz`, as Terraform uploads one: regular files and symlinks that
 * stay inside the directory, relative paths, `.terraformignore` honoured. A small ustar writer (with PAX
 * headers for long paths) rather than a dependency, so the CLI runs from a checkout with no install.
 */
export interface ArchiveEntry {
  path: string;
  type: 'file' | 'symlink';
  mode: number;
  mtime: Date;
  content: Buffer;
  linkTarget?: string;
}

const BLOCK = 512;

/** Walks `root`, leaving out what the rules ignore; entries in a stable (sorted) order. */
export async function collectEntries(root: string, rules: readonly IgnoreRule[]): Promise<ArchiveEntry[]> {
  const base = await realpath(root);
  const entries: ArchiveEntry[] = [];
  const reinclude = mayReinclude(rules);
  async function walk(dir: string): Promise<void> {
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      const full = join(dir, name);
      const path = relative(base, full).split(sep).join('/');
      const info = await lstat(full);
      const ignored = isIgnored(rules, path, info.isDirectory());
      if (info.isDirectory()) {
        // An ignored directory is still walked when a `!` rule might bring back something inside it.
        if (!ignored || reinclude) await walk(full);
        continue;
      }
      if (ignored) continue;
      if (info.isSymbolicLink()) {
        const target = await readlink(full);
        const resolved = resolve(dirname(full), target);
        if (resolved !== base && !resolved.startsWith(base + sep)) {
          throw new CliError('usage', `${path} links outside the configuration directory (${target}); Terraform would refuse it too`);
        }
        entries.push({ path, type: 'symlink', mode: 0o777, mtime: info.mtime, content: Buffer.alloc(0), linkTarget: target });
      } else if (info.isFile()) {
        entries.push({ path, type: 'file', mode: info.mode & 0o777, mtime: info.mtime, content: await readFile(full) });
      }
      // Sockets, FIFOs and devices have no place in a configuration: left out.
    }
  }
  await walk(base);
  return entries;
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, prefix: string, entry: { type: string; mode: number; size: number; mtime: Date; linkname: string }): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(entry.mode, 8), 100, 'latin1');
  block.write(octal(0, 8), 108, 'latin1');
  block.write(octal(0, 8), 116, 'latin1');
  block.write(octal(entry.size, 12), 124, 'latin1');
  block.write(octal(Math.floor(entry.mtime.getTime() / 1000), 12), 136, 'latin1');
  block.write(' '.repeat(8), 148, 'latin1');
  block.write(entry.type, 156, 'latin1');
  block.write(entry.linkname, 157, 100, 'utf8');
  block.write('ustar\0', 257, 'latin1');
  block.write('00', 263, 'latin1');
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7) + ' ', 148, 'latin1');
  return block;
}

function padded(content: Buffer): Buffer[] {
  const rest = content.length % BLOCK;
  return rest === 0 ? [content] : [content, Buffer.alloc(BLOCK - rest)];
}

/** A PAX record `"<len> <key>=<value>\n"`, whose length counts itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let length = Buffer.byteLength(body) + 1;
  while (String(length).length + Buffer.byteLength(body) !== length) length += 1;
  return `${length}${body}`;
}

/** Splits a path into ustar's prefix (155) and name (100), or undefined when it does not fit. */
function ustarName(path: string): { name: string; prefix: string } | undefined {
  if (Buffer.byteLength(path) <= 100) return { name: path, prefix: '' };
  for (let cut = path.indexOf('/'); cut !== -1; cut = path.indexOf('/', cut + 1)) {
    const prefix = path.slice(0, cut);
    const name = path.slice(cut + 1);
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100) return { name, prefix };
  }
  return undefined;
}

/** The entries as an uncompressed tar stream. */
export function tarOf(entries: readonly ArchiveEntry[]): Buffer {
  const parts: Buffer[] = [];
  for (const entry of entries) {
    const linkname = entry.linkTarget ?? '';
    const fits = ustarName(entry.path);
    const records =
      (fits ? '' : paxRecord('path', entry.path)) + (Buffer.byteLength(linkname) > 100 ? paxRecord('linkpath', linkname) : '');
    if (records) {
      const pax = Buffer.from(records, 'utf8');
      parts.push(header('PaxHeader', '', { type: 'x', mode: 0o644, size: pax.length, mtime: entry.mtime, linkname: '' }), ...padded(pax));
    }
    const { name, prefix } = fits ?? { name: entry.path.slice(-100), prefix: '' };
    const size = entry.type === 'file' ? entry.content.length : 0;
    parts.push(header(name, prefix, { type: entry.type === 'file' ? '0' : '2', mode: entry.mode, size, mtime: entry.mtime, linkname }));
    if (size > 0) parts.push(...padded(entry.content));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}

/** `dir` as a `.tar.gz` honouring its `.terraformignore`, with how many files went in. */
export async function archiveDirectory(dir: string): Promise<{ archive: Buffer; files: number }> {
  let info;
  try {
    info = await lstat(dir);
  } catch {
    throw new CliError('usage', `the configuration directory ${dir} does not exist`);
  }
  if (!info.isDirectory()) throw new CliError('usage', `${dir} is not a directory`);
  let ignoreFile = '';
  try {
    ignoreFile = await readFile(join(dir, '.terraformignore'), 'utf8');
  } catch {
    // No .terraformignore: the defaults alone.
  }
  const entries = await collectEntries(dir, parseIgnoreFile(ignoreFile));
  return { archive: gzipSync(tarOf(entries)), files: entries.length };
}
