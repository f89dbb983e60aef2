import { readFileSync } from 'node:fs';

/** Set by the bundler in the one-file CLI the service serves (services/api/src/http/cli-bundle.ts); unset when run from source. */
declare const RUNTASKS_CLI_VERSION: string | undefined;

/** The CLI's version: the bundle's own, or cli/package.json's. */
export function cliVersion(): string {
  if (typeof RUNTASKS_CLI_VERSION === 'string') return RUNTASKS_CLI_VERSION;
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
