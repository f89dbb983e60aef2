import { createHash } from 'node:crypto';
import { ApiError } from '@runtasks/shared/errors';

/**
 * `POST /runs` with an `Idempotency-Key`: a pipeline retrying its step (after a lost answer, a service
 * restart, a re-run job) finds the run its first try created instead of creating a second. A key names
 * one run per workspace; the same key with another request body is refused, so a reused key never
 * answers with a run that was asked for differently.
 */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** Visible ASCII only: a key is echoed in logs and errors, and compared byte for byte. */
const KEY = /^[\x21-\x7e]+$/;

/** The request's Idempotency-Key: null where not given, 400 where it is empty, too long or not visible ASCII. */
export function idempotencyKeyOf(headers: Record<string, string | string[] | undefined>): string | null {
  const value = headers[IDEMPOTENCY_KEY_HEADER.toLowerCase()];
  if (value === undefined) return null;
  const key = Array.isArray(value) ? value.join(',') : value.trim();
  if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH || !KEY.test(key))
    throw new ApiError(
      400,
      'invalid header',
      `${IDEMPOTENCY_KEY_HEADER} must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters without spaces, such as "github-\${GITHUB_RUN_ID}-\${GITHUB_RUN_ATTEMPT}".`,
      { header: IDEMPOTENCY_KEY_HEADER },
    );
  return key;
}

/** JSON with every object's keys sorted: the same document however its members were ordered. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** What a creation request asked for, as the SHA-256 of its body's canonical JSON. */
export const requestFingerprint = (body: unknown): string =>
  createHash('sha256')
    .update(canonicalJson(body ?? null))
    .digest('hex');

/** The run an earlier request with this key created, where this request asks for the same: else a 422 that names that run. */
export function checkReplay(earlier: { id: string; idempotencyFingerprint?: string | null }, fingerprint: string): void {
  if (earlier.idempotencyFingerprint === fingerprint) return;
  throw new ApiError(
    422,
    'idempotency key reused',
    `This ${IDEMPOTENCY_KEY_HEADER} created ${earlier.id} from a different request body. Send the same body to find that run again, or a new key for a new run.`,
    { header: IDEMPOTENCY_KEY_HEADER },
    {},
    { 'run-id': earlier.id },
  );
}
