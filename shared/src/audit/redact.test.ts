import { describe, expect, it } from '@jest/globals';
import { REDACTED, redactSecrets } from './redact.ts';

describe('redactSecrets', () => {
  it.each([
    [{ 'hmac-key': 'abc' }, { 'hmac-key': REDACTED }],
    [
      { token: 'rt_x', description: 'ci' },
      { token: REDACTED, description: 'ci' },
    ],
    [
      { 'access-token': 'x', url: 'https://t' },
      { 'access-token': REDACTED, url: 'https://t' },
    ],
    [{ nested: { secret_key: 's', name: 'n' } }, { nested: { secret_key: REDACTED, name: 'n' } }],
    [{ list: [{ password: 'p' }] }, { list: [{ password: REDACTED }] }],
    [{ 'hmac-key': null }, { 'hmac-key': null }],
    [
      { 'enforcement-level': 'mandatory', keyword: 'k' },
      { 'enforcement-level': 'mandatory', keyword: 'k' },
    ],
    ['plain', 'plain'],
    [null, null],
  ])('%j → %j', (input, output) => {
    expect(redactSecrets(input)).toEqual(output);
  });
});
