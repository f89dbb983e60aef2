/**
 * What an audit event's `meta` may never hold: a value under a name that says it is a secret (tokens,
 * HMAC keys, passwords, access tokens), at any depth. Such a value is dropped and its name kept, with
 * `"[redacted]"`, so an event still says the secret was set or changed without saying what it is.
 */
const SECRET_NAME = /token|secret|hmac|password|passphrase|private|credential|(^|[-_])key$/i;

export const REDACTED = '[redacted]';

export function redactSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactSecrets);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([name, inner]) => [name, SECRET_NAME.test(name) && inner !== null ? REDACTED : redactSecrets(inner)]),
  );
}
