import { execFileSync } from 'node:child_process';

/** HMAC-SHA512 (hex) computed by the openssl binary, independently of the code under test. */
export function opensslHmac(key: string, body: Buffer): string {
  const output = execFileSync('openssl', ['dgst', '-sha512', '-hmac', key], { input: body }).toString('utf8');
  const match = /=\s*([0-9a-f]{128})\s*$/.exec(output);
  if (!match?.[1]) throw new Error(`unexpected openssl output: ${output}`);
  return match[1];
}
