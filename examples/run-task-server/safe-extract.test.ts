import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { archiveDirectory } from '../../cli/src/archive.ts';
import { extractConfiguration, UnsafeArchiveError } from './safe-extract.ts';

/** A tar header and its padded content, written by hand so that it can say anything. */
function entry(
  path: string,
  options: { type?: string; mode?: number; content?: string | Buffer; linkname?: string; size?: number } = {},
): Buffer {
  const content = Buffer.from(options.content ?? '');
  const block = Buffer.alloc(512);
  const octal = (value: number, width: number): string => value.toString(8).padStart(width - 1, '0') + '\0';
  block.write(path, 0, 100, 'utf8');
  block.write(octal(options.mode ?? 0o644, 8), 100, 'latin1');
  block.write(octal(0, 8), 108, 'latin1');
  block.write(octal(0, 8), 116, 'latin1');
  block.write(octal(options.size ?? content.length, 12), 124, 'latin1');
  block.write(octal(1_700_000_000, 12), 136, 'latin1');
  block.write(' '.repeat(8), 148, 'latin1');
  block.write(options.type ?? '0', 156, 'latin1');
  block.write(options.linkname ?? '', 157, 100, 'utf8');
  block.write('ustar\0' + '00', 257, 'latin1');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7) + ' ', 148, 'latin1');
  return Buffer.concat([block, content, Buffer.alloc((512 - (content.length % 512)) % 512)]);
}
const pax = (path: string): Buffer => {
  const body = ` path=${path}\n`;
  const length = String(body.length + 3).length + body.length;
  return entry('PaxHeader', { type: 'x', content: `${length}${body}` });
};
const tarGz = (...entries: Buffer[]): Buffer => gzipSync(Buffer.concat([...entries, Buffer.alloc(1024)]));

describe('the example safe extraction', () => {
  let parent: string;
  let dir: string;
  beforeEach(() => {
    parent = mkdtempSync(join(tmpdir(), 'runtasks-extract-'));
    dir = join(parent, 'config');
    mkdirSync(dir);
  });
  afterEach(() => rmSync(parent, { recursive: true, force: true }));

  /** The refusal of `archive`, extracted into a fresh, empty directory (what a refused one left behind is the caller's to remove). */
  const refusal = async (archive: Buffer, limits?: { maxBytes: number; maxEntries: number }): Promise<string> => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    const error = await extractConfiguration(archive, dir, limits).then(
      () => new Error('expected a refusal'),
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(UnsafeArchiveError);
    // Nothing lands beside the target directory, whatever the archive said.
    expect(readdirSync(parent)).toEqual(['config']);
    return (error as Error).message;
  };

  it('extracts what the CLI archives: files, directories, long paths and executables, leaving its links out', async () => {
    const source = mkdtempSync(join(tmpdir(), 'runtasks-extract-source-'));
    try {
      const long = `${'deep/'.repeat(30)}main.tf`;
      mkdirSync(join(source, 'deep/'.repeat(30)), { recursive: true });
      writeFileSync(join(source, long), 'long\n');
      writeFileSync(join(source, 'main.tf'), 'resource "null_resource" "a" {}\n');
      writeFileSync(join(source, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
      symlinkSync('main.tf', join(source, 'link.tf'));
      const { archive } = await archiveDirectory(source, { maxBytes: 1024 * 1024 });
      const extracted = await extractConfiguration(archive, dir);
      expect(extracted.files.sort()).toEqual([long, 'main.tf', 'run.sh']);
      expect(extracted.skipped).toEqual([{ path: 'link.tf', reason: 'a symbolic link, left out' }]);
      expect(readFileSync(join(dir, long), 'utf8')).toBe('long\n');
      expect(statSync(join(dir, 'run.sh')).mode & 0o7777).toBe(0o755);
      expect(statSync(join(dir, 'main.tf')).mode & 0o7777).toBe(0o644);
    } finally {
      rmSync(source, { recursive: true, force: true });
    }
  });

  it.each([
    ['a ../ path', entry('../evil', { content: 'x' }), /"\.\.\/evil" goes up with \.\./],
    ['a ../ inside a path', entry('a/../../evil', { content: 'x' }), /"a\/\.\.\/\.\.\/evil" goes up/],
    ['an absolute path', entry('/tmp/evil', { content: 'x' }), /"\/tmp\/evil" is absolute/],
    ['a ../ in a PAX path', Buffer.concat([pax('../evil'), entry('ok', { content: 'x' })]), /"\.\.\/evil" goes up/],
    ['a ../ in a GNU long name', Buffer.concat([entry('././@LongLink', { type: 'L', content: '../evil\0' }), entry('ok')]), /goes up/],
    ['a NUL in a PAX path', Buffer.concat([pax('a\0b'), entry('ok')]), /holds a NUL/],
    [
      'a path written twice',
      Buffer.concat([entry('a.tf', { content: '1' }), entry('./a.tf', { content: '2' })]),
      /"\.\/a\.tf" is written twice/,
    ],
    [
      'a file where a directory is',
      Buffer.concat([entry('a', { content: '1' }), entry('a/b.tf', { content: '2' })]),
      /"a\/b\.tf" collides/,
    ],
  ])('refuses %s, writing nothing outside the directory', async (_, tar, message) => {
    expect(await refusal(tarGz(tar))).toMatch(message);
  });

  it('leaves out links, devices and FIFOs, and drops setuid, setgid, sticky and write-for-all bits', async () => {
    const archive = tarGz(
      entry('passwd', { type: '2', linkname: '/etc/passwd' }),
      entry('hard', { type: '1', linkname: '/etc/passwd' }),
      entry('null', { type: '3' }),
      entry('disk', { type: '4' }),
      entry('pipe', { type: '6' }),
      entry('bin/', { type: '5', mode: 0o7777 }),
      entry('bin/tool', { mode: 0o6777, content: '#!/bin/sh\n' }),
      entry('shared.tf', { mode: 0o666, content: 'x' }),
    );
    const extracted = await extractConfiguration(archive, dir);
    expect(extracted.files).toEqual(['bin/tool', 'shared.tf']);
    expect(extracted.skipped.map(({ path, reason }) => `${path}: ${reason}`)).toEqual([
      'passwd: a symbolic link, left out',
      'hard: a hard link, left out',
      'null: a character device, left out',
      'disk: a block device, left out',
      'pipe: a FIFO, left out',
    ]);
    expect(readdirSync(dir).sort()).toEqual(['bin', 'shared.tf']);
    expect(lstatSync(join(dir, 'bin')).mode & 0o7777).toBe(0o755);
    expect(statSync(join(dir, 'bin/tool')).mode & 0o7777).toBe(0o755);
    expect(statSync(join(dir, 'shared.tf')).mode & 0o7777).toBe(0o644);
  });

  it('refuses archives beyond its limits, truncated or broken, however they are disguised', async () => {
    const limits = { maxBytes: 1024 * 1024, maxEntries: 3 };
    // A gzip bomb: 20 MiB of zeros in about 20 KiB, stopped after the first MiB.
    const bomb = tarGz(entry('zeros', { content: Buffer.alloc(20 * 1024 * 1024) }));
    expect(bomb.length).toBeLessThan(64 * 1024);
    expect(await refusal(bomb, limits)).toMatch(/expands beyond 1048576 bytes/);
    expect(await refusal(tarGz(entry('a'), entry('b'), entry('c'), entry('d')), limits)).toMatch(/more than 3 entries/);
    // A header claiming more content than the archive holds.
    expect(await refusal(gzipSync(entry('short', { size: 4096, content: 'x' })), limits)).toMatch(/truncated/);
    const corrupt = Buffer.concat([entry('a', { content: 'x' }), Buffer.alloc(1024)]);
    corrupt[10] = 0x41;
    expect(await refusal(gzipSync(corrupt), limits)).toMatch(/checksum does not match/);
    expect(await refusal(Buffer.from('not gzip at all'), limits)).toMatch(/not gzip data/);
  });

  it('reads straight from the download, as a task does with the payload’s access token', async () => {
    const archive = tarGz(entry('main.tf', { content: 'terraform {}\n' }));
    const server = createServer((req, res) => {
      if (req.headers.authorization !== 'Bearer run-token') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(archive);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v2/configuration-versions/cv-1/download`;
      const response = await fetch(url, { headers: { authorization: 'Bearer run-token' } });
      expect(response.ok).toBe(true);
      const extracted = await extractConfiguration(response.body as AsyncIterable<Uint8Array>, dir);
      expect(extracted.files).toEqual(['main.tf']);
      // What tar itself sees in the same bytes, as a check on the hand-written headers above.
      writeFileSync(join(parent, 'a.tar.gz'), archive);
      expect(execFileSync('tar', ['-tzf', join(parent, 'a.tar.gz')], { encoding: 'utf8' })).toBe('main.tf\n');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
