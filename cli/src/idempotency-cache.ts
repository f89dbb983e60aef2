/**
 * Which configuration version a try of `run start` uploaded, by idempotency key, in the machine's
 * temporary directory: a retried step on the same runner sends the same run request (the same
 * configuration version), which the service answers with the run it created, instead of a request that
 * differs only by a fresh upload. A runner without the file (another machine) uploads again.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CONFIGURATION_VERSION = /^cv-[A-Za-z0-9]{1,64}$/;

function fileOf(address: string, key: string): string {
  const name = createHash('sha256').update(`${address}\n${key}`).digest('hex').slice(0, 32);
  return join(tmpdir(), 'runtasks-cli', `start-${name}.json`);
}

export async function rememberedVersion(address: string, key: string): Promise<string | undefined> {
  try {
    const saved = JSON.parse(await readFile(fileOf(address, key), 'utf8')) as { configurationVersion?: unknown };
    const id = saved.configurationVersion;
    return typeof id === 'string' && CONFIGURATION_VERSION.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}

/** Best effort: a runner whose temporary directory cannot be written only loses the reuse. */
export async function rememberVersion(address: string, key: string, configurationVersion: string): Promise<void> {
  const file = fileOf(address, key);
  try {
    await mkdir(join(tmpdir(), 'runtasks-cli'), { recursive: true, mode: 0o700 });
    await writeFile(`${file}.tmp`, JSON.stringify({ configurationVersion }), { mode: 0o600 });
    await rename(`${file}.tmp`, file);
  } catch {
    // Nothing to do: the next try uploads again.
  }
}
