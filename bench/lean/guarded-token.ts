/** The guarded lean reference's access tokens: one per result, derived from its id, nothing stored (as the service's). */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** A result's access token, under the HMAC key. */
export const resultToken = (key: string, resultId: string): string => createHmac('sha256', key).update(resultId).digest('base64url');

export function tokenMatches(key: string, resultId: string, given: string): boolean {
  const expected = Buffer.from(resultToken(key, resultId));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
