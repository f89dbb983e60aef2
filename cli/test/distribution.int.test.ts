import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startHarness, type Harness } from '../../test/support/harness.ts';

const execFileAsync = promisify(execFile);

/** A command's exit status and output, run asynchronously: the service it talks to answers from this process. */
async function run(command: string, args: string[], options: { cwd?: string; env: NodeJS.ProcessEnv }) {
  try {
    const { stdout, stderr } = await execFileAsync(command, args, { ...options, encoding: 'utf8' });
    return { status: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { status: failed.code ?? null, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const version = (file: string): string => (JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as { version: string }).version;

/**
 * How the CLI reaches a runner: the one file the service serves (built from its own sources, version
 * and SHA-256 with it), and `npx` from this repository (installed under node_modules, where Node does not
 * strip types by itself).
 */
describe('the CLI as a runner gets it', () => {
  let h: Harness;
  const dirs: string[] = [];
  const tempDir = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'runtasks-dist-'));
    dirs.push(dir);
    return dir;
  };
  beforeAll(async () => {
    h = await startHarness({ ops: true });
  });
  afterAll(async () => {
    await h.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('is one release: the CLI has the version of the service it comes with', () => {
    expect(version('cli/package.json')).toBe(version('package.json'));
  });

  it('the service serves it as one file with its SHA-256, which runs with nothing but Node and prints both versions', async () => {
    const ping = await fetch(`${h.baseUrl}/api/v2/ping`);
    expect(ping.headers.get('x-runtasks-version')).toBe(version('package.json'));

    const download = await fetch(`${h.baseUrl}/cli/runtasks.mjs`);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const code = Buffer.from(await download.arrayBuffer());
    const sha256 = createHash('sha256').update(code).digest('hex');
    const listed = await (await fetch(`${h.baseUrl}/cli/runtasks.mjs.sha256`)).text();
    expect(listed).toBe(`${sha256}  runtasks.mjs\n`);
    expect(download.headers.get('etag')).toBe(`"${sha256}"`);
    // A 304 to a client that has these bytes (curl: fetch marks a conditional request no-cache).
    const conditional = [
      '-s',
      '-o',
      '/dev/null',
      '-w',
      '%{http_code}',
      '-H',
      `If-None-Match: "${sha256}"`,
      `${h.baseUrl}/cli/runtasks.mjs`,
    ];
    // Asynchronously: the service answers from this process.
    expect((await execFileAsync('curl', conditional, { encoding: 'utf8' })).stdout).toBe('304');

    // No dependencies: it imports nothing but Node's own modules.
    const text = code.toString('utf8');
    const imports = [...text.matchAll(/^import .* from "([^"]+)";$/gm)].map((match) => match[1]);
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.filter((specifier) => !specifier?.startsWith('node:'))).toEqual([]);
    expect(text.startsWith('#!/usr/bin/env node\n')).toBe(true);

    const dir = tempDir();
    writeFileSync(join(dir, 'runtasks.mjs'), code);
    // Checked as the action and the template check it.
    execFileSync('sha256sum', ['-c', '-'], { cwd: dir, input: listed });
    const printed = await run(process.execPath, [join(dir, 'runtasks.mjs'), '--version'], {
      env: { PATH: process.env['PATH'] ?? '', RUNTASKS_ADDRESS: h.baseUrl },
    });
    expect(printed).toEqual({
      status: 0,
      stdout: `runtasks ${version('cli/package.json')}\nservice ${version('package.json')} at ${h.baseUrl} (the same version)\n`,
      stderr: '',
    });
  });

  it('npx installs it from this repository and runs it from node_modules', async () => {
    const dir = tempDir();
    const env = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env['PATH'] ?? ''}`, npm_config_cache: join(dir, 'cache') };
    const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: ROOT, env, encoding: 'utf8' }).trim();
    const files = execFileSync('tar', ['-tzf', join(dir, tarball)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean);
    // Only the CLI: a pipeline fetches a few dozen kilobytes, not the service.
    expect(files.filter((file) => !file.startsWith('package/cli/'))).toEqual(['package/package.json', 'package/README.md']);
    const npx = await run('npm', ['exec', '--yes', `--package=${join(dir, tarball)}`, '--', 'runtasks', '--version'], {
      cwd: dir,
      env: { ...env, RUNTASKS_ADDRESS: h.baseUrl },
    });
    expect(npx).toEqual({
      status: 0,
      stdout: `runtasks ${version('cli/package.json')}\nservice ${version('package.json')} at ${h.baseUrl} (the same version)\n`,
      stderr: '',
    });
  }, 60_000);
});
