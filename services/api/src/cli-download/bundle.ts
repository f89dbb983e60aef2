/**
 * The `runtasks` CLI as one file, built from this service's own `cli/` sources: what `GET
 * /cli/runtasks.mjs` serves, so a pipeline runs the CLI of the service it talks to. The project has no
 * build step, so esbuild bundles it at the first request and the process keeps it; the output depends
 * only on the sources and esbuild's version, so every API process of one release serves the same bytes
 * (and the same SHA-256).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface CliBundle {
  code: Buffer;
  sha256: string;
  version: string;
}

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const ENTRY = 'cli/src/main.ts';
/** The oldest Node the bundle runs on: fetch, parseArgs, top-level await and the zlib it uses are all there. */
export const MINIMUM_NODE_MAJOR = 22;

/** The CLI's and the service's version: one release, one number (cli/package.json, checked equal to the root's by a test). */
export function cliPackageVersion(): string {
  return (JSON.parse(readFileSync(`${ROOT}cli/package.json`, 'utf8')) as { version: string }).version;
}

const BANNER = (version: string): string =>
  [
    '#!/usr/bin/env node',
    `// runtasks ${version}: the Run Tasks service's CLI for pipelines, one file, no dependencies (Node ${MINIMUM_NODE_MAJOR} or later).`,
    '// Built by the service from its cli/ sources with esbuild; see docs/pipelines.md.',
    `if (Number(process.versions.node.split('.')[0]) < ${MINIMUM_NODE_MAJOR}) {`,
    `  process.stderr.write('runtasks: needs Node ${MINIMUM_NODE_MAJOR} or later; this is Node ' + process.versions.node + '\\n');`,
    '  process.exit(2);',
    '}',
  ].join('\n');

export async function buildCliBundle(): Promise<CliBundle> {
  const { build } = await import('esbuild');
  const version = cliPackageVersion();
  const result = await build({
    entryPoints: [ENTRY],
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${MINIMUM_NODE_MAJOR}`,
    write: false,
    charset: 'utf8',
    legalComments: 'none',
    logLevel: 'silent',
    banner: { js: BANNER(version) },
    define: { RUNTASKS_CLI_VERSION: JSON.stringify(version) },
  });
  const output = result.outputFiles[0];
  if (!output) throw new Error('esbuild produced no output for the CLI');
  const code = Buffer.from(output.contents);
  return { code, sha256: createHash('sha256').update(code).digest('hex'), version };
}

let built: Promise<CliBundle> | undefined;

/** The bundle, built once per process (a failed build is tried again at the next request). */
export function cliBundle(): Promise<CliBundle> {
  built ??= buildCliBundle().catch((error: unknown) => {
    built = undefined;
    throw error;
  });
  return built;
}
