/**
 * A small ustar writer (with PAX records for long paths, long link targets and huge sizes) rather than a
 * dependency, so the CLI runs from a checkout with no install. It writes headers only: file contents are
 * streamed between them by the caller (archive.ts), so no file is ever held whole in memory.
 */
export interface TarEntry {
  /** Relative, `/`-separated. */
  path: string;
  type: 'file' | 'symlink';
  /** Permission bits only: never setuid, setgid or sticky. */
  mode: number;
  mtime: Date;
  /** Bytes of content (0 for a symlink). */
  size: number;
  linkTarget?: string;
}

export const BLOCK = 512;
/** What ends an archive: two zero blocks. */
export const TAR_END = Buffer.alloc(BLOCK * 2);
/** The largest size the header's 11 octal digits hold; beyond it a PAX `size` record says it. */
const USTAR_MAX_SIZE = 0o77777777777;

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(name: string, prefix: string, entry: { type: string; mode: number; size: number; mtime: Date; linkname: string }): Buffer {
  const block = Buffer.alloc(BLOCK);
  block.write(name, 0, 100, 'utf8');
  block.write(octal(entry.mode, 8), 100, 'latin1');
  block.write(octal(0, 8), 108, 'latin1');
  block.write(octal(0, 8), 116, 'latin1');
  block.write(octal(Math.min(entry.size, USTAR_MAX_SIZE), 12), 124, 'latin1');
  block.write(octal(Math.max(0, Math.floor(entry.mtime.getTime() / 1000)), 12), 136, 'latin1');
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

/** Zeros after `size` bytes of content, up to the next block. */
export function padding(size: number): Buffer {
  const rest = size % BLOCK;
  return Buffer.alloc(rest === 0 ? 0 : BLOCK - rest);
}

const padded = (bytes: number): number => Math.ceil(bytes / BLOCK) * BLOCK;

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

/** The header blocks of an entry (a PAX header first when the ustar fields cannot hold it). */
export function headerOf(entry: TarEntry): Buffer {
  const linkname = entry.linkTarget ?? '';
  const fits = ustarName(entry.path);
  const records =
    (fits ? '' : paxRecord('path', entry.path)) +
    (Buffer.byteLength(linkname) > 100 ? paxRecord('linkpath', linkname) : '') +
    (entry.size > USTAR_MAX_SIZE ? paxRecord('size', String(entry.size)) : '');
  const { name, prefix } = fits ?? { name: entry.path.slice(-100), prefix: '' };
  const main = header(name, prefix, {
    type: entry.type === 'file' ? '0' : '2',
    mode: entry.mode,
    size: entry.size,
    mtime: entry.mtime,
    linkname,
  });
  if (!records) return main;
  const pax = Buffer.from(records, 'utf8');
  const paxHeader = header('PaxHeader', '', { type: 'x', mode: 0o644, size: pax.length, mtime: entry.mtime, linkname: '' });
  return Buffer.concat([paxHeader, pax, padding(pax.length), main]);
}

/** How many bytes an entry takes in the archive, headers and padded content, without building it. */
export function tarBytes(entry: TarEntry): number {
  return headerOf(entry).length + padded(entry.size);
}
