import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { archiveDirectory } from '../src/archive.ts';
import { CliError, EXIT } from '../src/exit-codes.ts';

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
});
