import { describe, expect, it } from '@jest/globals';
import { backoffMs, describeNetworkError, MAX_BACKOFF_MS, retryAfterMs } from '../src/retry.ts';

const failed = (code: string, message = code, name = 'TypeError'): unknown =>
  Object.assign(new Error('fetch failed'), { name, cause: { code, message } });

describe('retrying the service', () => {
  it.each([
    [0, 0, 500],
    [1, 0, 1000],
    [3, 0, 4000],
    [5, 0, MAX_BACKOFF_MS],
    [40, 0, MAX_BACKOFF_MS],
    [2, 1, 1600],
  ])('backs off %i tries in (random %d): %i ms', (attempt, random, expected) => {
    expect(backoffMs(attempt, () => random)).toBe(expected);
  });

  it.each([
    ['3', 3000],
    ['0', 0],
    ['Fri, 27 Nov 2026 12:00:10 GMT', 10_000],
    ['Fri, 27 Nov 2026 11:00:00 GMT', 0],
    ['soon', undefined],
    [null, undefined],
    ['', undefined],
  ])('reads Retry-After %j as %j ms', (header, expected) => {
    expect(retryAfterMs(header, Date.parse('Fri, 27 Nov 2026 12:00:00 GMT'))).toBe(expected);
  });

  it.each([
    [failed('ECONNREFUSED'), 'https://svc', 'unreachable', 'cannot reach the service at https://svc: connection refused'],
    [failed('ENOTFOUND'), 'https://svc', 'unreachable', 'cannot reach the service at https://svc: unknown host'],
    [failed('ECONNRESET'), 'https://svc', 'transient', 'cannot reach the service at https://svc: connection closed'],
    [failed('UND_ERR_SOCKET', 'other side closed'), 'http://svc', 'transient', 'cannot reach the service at http://svc: connection closed'],
    [
      Object.assign(new Error('timeout'), { name: 'TimeoutError' }),
      'http://svc',
      'transient',
      'cannot reach the service at http://svc: no answer within 30 s',
    ],
    [
      failed('ERR_SSL_WRONG_VERSION_NUMBER', 'ssl3_get_record:wrong version number'),
      'https://svc:3000',
      'fatal',
      "https://svc:3000 does not speak TLS (HTTPS) at that port, it looks like plain HTTP: use http://svc:3000, or the port where the service's TLS listens",
    ],
    [
      failed('UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'),
      'https://svc',
      'fatal',
      'the service at https://svc has a certificate this runner does not trust (UNABLE_TO_VERIFY_LEAF_SIGNATURE): add its CA with NODE_EXTRA_CA_CERTS=FILE',
    ],
  ])('a failed fetch (%#) is %s, in one line', (error, address, kind, message) => {
    expect(describeNetworkError(error, address, 30_000)).toMatchObject({ kind, message });
  });
});
