import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  ftruncateSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { archiveDirectory, archiveLimitsFrom, DEFAULT_MAX_ARCHIVE_BYTES } from '../src/archive.ts';
import { CliError, EXIT } from '../src/exit-codes.ts';
import { archiveUnprivileged } from './support/unprivileged.ts';

/** The archive is checked by the system's tar, as the service and Terraform would read it. */
describe('the configuration archive', () => {
  let dir: string;
  let out: string;
  const write = (path: string, content = `# ${path}\n`): void => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  };
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'runtasks-cli-config-'));
    out = mkdtempSync(join(tmpdir(), 'runtasks-cli-extract-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(out, { recursive: true, force: true });
  });

  function extract(archive: Buffer): string[] {
    writeFileSync(join(out, 'config.tar.gz'), archive);
    mkdirSync(join(out, 'x'));
    execFileSync('tar', ['-xzf', join(out, 'config.tar.gz'), '-C', join(out, 'x')]);
    return execFileSync('tar', ['-tzf', join(out, 'config.tar.gz')], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .sort();
  }

  it('holds the configuration with .terraformignore honoured, modes, symlinks and long paths intact', async () => {
    write('main.tf', 'resource "null_resource" "a" {}\n');
    write('modules/vpc/main.tf');
    write('prod.tfvars', 'password = "hunter2"\n');
    write('.terraformignore', '*.tfvars\n');
    write('.git/HEAD');
    write('.terraform/providers/aws');
    write('.terraform/modules/vpc/main.tf');
    write('scripts/run.sh', '#!/bin/sh\n');
    chmodSync(join(dir, 'scripts/run.sh'), 0o755);
    symlinkSync('modules/vpc', join(dir, 'vpc'));
    const long = `${'deep/'.repeat(40)}${'n'.repeat(120)}.tf`;
    write(long, 'long\n');

    const { archive, files } = await archiveDirectory(dir);
    expect(archive.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    const listed = extract(archive);
    expect(listed).toEqual(
      ['.terraform/modules/vpc/main.tf', '.terraformignore', 'main.tf', 'modules/vpc/main.tf', 'scripts/run.sh', 'vpc', long].sort(),
    );
    expect(files).toBe(7);
    expect(readFileSync(join(out, 'x/main.tf'), 'utf8')).toBe('resource "null_resource" "a" {}\n');
    expect(readFileSync(join(out, 'x', long), 'utf8')).toBe('long\n');
    expect(statSync(join(out, 'x/scripts/run.sh')).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(out, 'x/vpc'))).toBe('modules/vpc');
  });

  it('is a valid empty archive for an empty directory', async () => {
    const { archive, files } = await archiveDirectory(dir);
    expect(files).toBe(0);
    expect(extract(archive)).toEqual(['']);
  });

  it.each([
    ['a missing directory', (root: string) => join(root, 'nope'), /does not exist/],
    ['a file', (root: string) => (writeFileSync(join(root, 'f'), ''), join(root, 'f')), /is not a directory/],
    ['a symlink leaving the directory', (root: string) => (symlinkSync('/etc/passwd', join(root, 'passwd')), root), /links outside/],
  ])('refuses %s with a usage error', async (_, target, message) => {
    const error = await archiveDirectory(target(dir)).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).code).toBe(EXIT.usage);
    expect((error as CliError).message).toMatch(message);
  });

  /** The archive's failure, which must be a one-line usage error (exit 2): nothing is sent after it. */
  async function refusal(promise: Promise<unknown>): Promise<string> {
    const error = await promise.then(
      () => new Error('expected a refusal'),
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).code).toBe(EXIT.usage);
    expect((error as CliError).message).not.toContain('\n');
    return (error as CliError).message;
  }

  const sparse = (path: string, size: number): void => {
    const fd = openSync(join(dir, path), 'w');
    ftruncateSync(fd, size);
    closeSync(fd);
  };

  it('reports every entry it cannot archive by path, and lets .terraformignore leave them out', async () => {
    write('main.tf');
    execFileSync('mkfifo', [join(dir, 'pipe\tline')]);
    execFileSync('mkfifo', [join(dir, 'left-out.fifo')]);
    writeFileSync(Buffer.concat([Buffer.from(`${dir}/bad`), Buffer.from([0xff, 0x0a]), Buffer.from('.tf')]), '');
    symlinkSync('/etc/passwd', join(dir, 'passwd'));
    write('.terraformignore', '*.fifo\n');
    const socket = createServer();
    await new Promise<void>((resolve) => socket.listen(join(dir, 'sock'), resolve));
    try {
      const message = await refusal(archiveDirectory(dir));
      expect(message).toBe(
        `cannot archive ${dir}: 4 entries cannot go into the configuration: ` +
          'passwd links outside the configuration directory (/etc/passwd); Terraform would refuse it too; ' +
          'pipe\\x09line is a FIFO (named pipe), which a configuration cannot hold (only files, directories and symlinks); ' +
          'sock is a socket, which a configuration cannot hold (only files, directories and symlinks); ' +
          'bad\\xff\\x0a.tf has a name that is not UTF-8. Leave them out with .terraformignore, or fix them',
      );
      write('.terraformignore', '*.fifo\npipe*\nsock\npasswd\nbad*\n');
      expect((await archiveDirectory(dir)).files).toBe(2);
    } finally {
      await new Promise<void>((resolve) => socket.close(() => resolve()));
    }
  });

  it.each([
    [
      'a FIFO',
      (path: string) => execFileSync('mkfifo', [path]),
      /it is a FIFO \(named pipe\), not a regular file; nothing was read from it$/,
    ],
    [
      'a link to /dev/zero',
      (path: string) => symlinkSync('/dev/zero', path),
      /it links outside the configuration directory \(\/dev\/zero\)$/,
    ],
    [
      'a link to a FIFO inside',
      (path: string) => (execFileSync('mkfifo', [join(dirname(path), 'pipe')]), symlinkSync('pipe', path)),
      /it is a FIFO \(named pipe\), not a regular file/,
    ],
    ['a directory', (path: string) => mkdirSync(path), /it is a directory, not a regular file/],
    [
      'larger than 1 MiB',
      (path: string) => writeFileSync(path, '#'.repeat(1024 * 1024 + 1)),
      /it is 1\.0 MiB, more than the 1\.0 MiB a list/,
    ],
    ['not UTF-8', (path: string) => writeFileSync(path, Buffer.from([0x2a, 0xff, 0x0a])), /it is not UTF-8 text$/],
  ])('never waits on nor reads much of a .terraformignore that is %s', async (_, make, message) => {
    write('main.tf');
    make(join(dir, '.terraformignore'));
    expect(await refusal(archiveDirectory(dir))).toMatch(message);
  });

  it('names the line of a pattern it cannot read', async () => {
    write('.terraformignore', '*.tfvars\n\n[z-a]\n');
    expect(await refusal(archiveDirectory(dir))).toBe('.terraformignore line 3: "[z-a]": the range z-a is backwards');
  });

  it('refuses a configuration larger than the service takes before compressing it, naming the largest files', async () => {
    write('main.tf');
    sparse('disk.img', 3 * 1024 ** 3);
    sparse('other.img', 1024 ** 3);
    const message = await refusal(archiveDirectory(dir, { maxBytes: DEFAULT_MAX_ARCHIVE_BYTES }));
    expect(message).toMatch(/is too large for the service: more than 500 MiB before compression \(largest: disk\.img \(3\.0 GiB\)/);
    expect(message).toMatch(/the service takes 50 MiB \(500 MiB once decompressed\)/);
  });

  it('stops compressing once the archive passes the limit', async () => {
    write('noise.bin', randomBytes(30_000).toString('base64'));
    const message = await refusal(archiveDirectory(dir, { maxBytes: 8192 }));
    expect(message).toMatch(/is too large for the service: more than 8\.0 KiB compressed; the service takes 8\.0 KiB/);
    expect((await archiveDirectory(dir, { maxBytes: 64 * 1024 })).files).toBe(1);
  });

  it('streams contents whole, in order, with permission bits only (no setuid, setgid or sticky)', async () => {
    const big = randomBytes(300_001);
    writeFileSync(join(dir, 'big.bin'), big);
    write('a.sh', '#!/bin/sh\n');
    chmodSync(join(dir, 'a.sh'), 0o6755);
    write('empty');
    writeFileSync(join(dir, 'empty'), '');
    const { archive } = await archiveDirectory(dir);
    expect(extract(archive)).toEqual(['a.sh', 'big.bin', 'empty']);
    expect(readFileSync(join(out, 'x/big.bin')).equals(big)).toBe(true);
    writeFileSync(join(out, 'config.tar.gz'), archive);
    const listing = execFileSync('tar', ['-tvzf', join(out, 'config.tar.gz')], { encoding: 'utf8' });
    expect(listing).toMatch(/^-rwxr-xr-x .* a\.sh$/m);
  });

  it('takes its limit from RUNTASKS_MAX_ARCHIVE_BYTES, or the service default', () => {
    expect(archiveLimitsFrom({})).toEqual({ maxBytes: 50 * 1024 * 1024 });
    expect(archiveLimitsFrom({ RUNTASKS_MAX_ARCHIVE_BYTES: '104857600' })).toEqual({ maxBytes: 104857600 });
    for (const wrong of ['ten', '12.5', '-1', '1023', String(2 ** 31)]) {
      expect(() => archiveLimitsFrom({ RUNTASKS_MAX_ARCHIVE_BYTES: wrong })).toThrow(
        /RUNTASKS_MAX_ARCHIVE_BYTES must be a number of bytes/,
      );
    }
  });

  describe('as a user that file modes apply to', () => {
    it('neither lists nor reads a left-out directory nothing can come back from', async () => {
      write('main.tf');
      write('.git/objects/ab/cdef');
      write('build/secret/key');
      write('build/keep.tf');
      write('.terraformignore', 'build/\n');
      chmodSync(join(dir, '.git/objects'), 0o000);
      chmodSync(join(dir, 'build/secret'), 0o000);
      expect(await archiveUnprivileged(dir)).toEqual({ files: 2 });
      // An anchored `!` rule reaches build/keep.tf but nothing in build/secret.
      write('.terraformignore', 'build/\n!/build/keep.tf\n');
      expect(await archiveUnprivileged(dir)).toEqual({ files: 3 });
      // An unanchored one could match in build/secret too, so build/secret must be listed, and cannot be.
      write('.terraformignore', 'build/\n!keep.tf\n');
      expect(await archiveUnprivileged(dir)).toEqual({
        code: EXIT.usage,
        message: expect.stringContaining(
          'build/secret/ cannot be listed (permission denied); it is left out, but "!keep.tf" (.terraformignore line 2) could bring back something inside it',
        ),
      });
    });

    it('reports unreadable files and directories it would archive', async () => {
      write('main.tf');
      write('secret.tfvars');
      write('private/a.tf');
      chmodSync(join(dir, 'secret.tfvars'), 0o000);
      chmodSync(join(dir, 'private'), 0o000);
      expect(await archiveUnprivileged(dir)).toEqual({
        code: EXIT.usage,
        message: expect.stringMatching(
          /: 2 entries cannot go into the configuration: private\/ cannot be listed \(permission denied\); secret\.tfvars cannot be read \(permission denied\)\./,
        ),
      });
    });
  });
});
