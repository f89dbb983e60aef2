import { describe, expect, it } from '@jest/globals';
import {
  API_TOKEN_PREFIX,
  CALLBACK_TOKEN_PREFIX,
  createSecretBox,
  generateToken,
  isPlausibleToken,
  looksLikeToken,
  safeEqualHex,
} from './secrets.ts';

const KEY_A = 'a'.repeat(32) + '-first-secret-key';
const KEY_B = 'b'.repeat(32) + '-second-secret-key';

describe('tokens', () => {
  it.each([API_TOKEN_PREFIX, CALLBACK_TOKEN_PREFIX])(
    'generateToken(%s) has the prefix and 43 base64url characters (256 bits)',
    (prefix) => {
      const token = generateToken(prefix);
      expect(token.startsWith(prefix)).toBe(true);
      expect(token.slice(prefix.length)).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(token.slice(prefix.length), 'base64url')).toHaveLength(32);
      expect(looksLikeToken(token, prefix)).toBe(true);
    },
  );

  it('generated tokens are distinct', () => {
    const tokens = Array.from({ length: 1000 }, () => generateToken(API_TOKEN_PREFIX));
    expect(new Set(tokens).size).toBe(tokens.length);
  });

  const body = 'A'.repeat(21) + '_-' + '9'.repeat(20);
  it.each([
    { value: `rtk_${body}`, prefix: 'rtk_', expected: true },
    { value: `rtcb_${body}`, prefix: 'rtcb_', expected: true },
    { value: `rtcb_${body}`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body}`, prefix: 'rtcb_', expected: false },
    { value: body, prefix: 'rtk_', expected: false },
    { value: 'rtk_', prefix: 'rtk_', expected: false },
    { value: '', prefix: 'rtk_', expected: false },
    { value: `rtk_${body.slice(1)}`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body}A`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body.slice(1)}=`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body.slice(1)}+`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body.slice(1)}/`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body.slice(1)} `, prefix: 'rtk_', expected: false },
    { value: ` rtk_${body}`, prefix: 'rtk_', expected: false },
    { value: `rtk_${body}\n`, prefix: 'rtk_', expected: false },
    { value: `RTK_${body}`, prefix: 'rtk_', expected: false },
  ])('looksLikeToken($value, $prefix) → $expected', ({ value, prefix, expected }) => {
    expect(looksLikeToken(value, prefix)).toBe(expected);
  });
});

describe('tokens bound to a subject', () => {
  const box = createSecretBox(KEY_A);
  const token = box.bindToken(CALLBACK_TOKEN_PREFIX, 'result-1');

  it('look like any generated token, and are distinct', () => {
    expect(looksLikeToken(token, CALLBACK_TOKEN_PREFIX)).toBe(true);
    const tokens = Array.from({ length: 1000 }, () => box.bindToken(CALLBACK_TOKEN_PREFIX, 'result-1'));
    expect(new Set(tokens).size).toBe(tokens.length);
  });

  it('are bound to their subject, prefix and key only', () => {
    expect(box.isBoundTo(token, CALLBACK_TOKEN_PREFIX, 'result-1')).toBe(true);
    expect(box.isBoundTo(token, CALLBACK_TOKEN_PREFIX, 'result-2')).toBe(false);
    expect(box.isBoundTo(token, CALLBACK_TOKEN_PREFIX, 'result-1\u0000')).toBe(false);
    expect(box.isBoundTo(token.replace(CALLBACK_TOKEN_PREFIX, API_TOKEN_PREFIX), API_TOKEN_PREFIX, 'result-1')).toBe(false);
    expect(createSecretBox(KEY_B).isBoundTo(token, CALLBACK_TOKEN_PREFIX, 'result-1')).toBe(false);
    expect(box.isBoundTo(generateToken(CALLBACK_TOKEN_PREFIX), CALLBACK_TOKEN_PREFIX, 'result-1')).toBe(false);
  });

  it('refuse every single-character change and every malformed shape', () => {
    const body = token.slice(CALLBACK_TOKEN_PREFIX.length);
    for (let index = 0; index < body.length; index += 1) {
      const changed = body.slice(0, index) + (body[index] === 'A' ? 'B' : 'A') + body.slice(index + 1);
      // The last character carries only 4 of its 6 bits: a change there may decode to the same bytes.
      if (Buffer.from(changed, 'base64url').equals(Buffer.from(body, 'base64url'))) continue;
      expect(box.isBoundTo(CALLBACK_TOKEN_PREFIX + changed, CALLBACK_TOKEN_PREFIX, 'result-1')).toBe(false);
    }
    for (const malformed of ['', CALLBACK_TOKEN_PREFIX, token.slice(0, -1), `${token}A`, ` ${token}`, token.toUpperCase()]) {
      expect(box.isBoundTo(malformed, CALLBACK_TOKEN_PREFIX, 'result-1')).toBe(false);
    }
  });
});

describe('tokens derived from a subject', () => {
  const box = createSecretBox(KEY_A);
  const subject = 'taskrs-AbCdEf0123456789';
  const token = box.deriveToken(CALLBACK_TOKEN_PREFIX, subject);

  it('are one per subject and key, plausible, and not the shape of a random token', () => {
    expect(box.deriveToken(CALLBACK_TOKEN_PREFIX, subject)).toBe(token);
    expect(box.deriveToken(CALLBACK_TOKEN_PREFIX, 'taskrs-AbCdEf0123456788')).not.toBe(token);
    expect(createSecretBox(KEY_B).deriveToken(CALLBACK_TOKEN_PREFIX, subject)).not.toBe(token);
    expect(isPlausibleToken(token)).toBe(true);
    expect(looksLikeToken(token, CALLBACK_TOKEN_PREFIX)).toBe(false);
    expect(() => box.deriveToken(CALLBACK_TOKEN_PREFIX, 'not an id')).toThrow();
  });

  it('name their subject under their key and prefix only', () => {
    expect(box.derivedSubject(token, CALLBACK_TOKEN_PREFIX)).toBe(subject);
    expect(createSecretBox(KEY_B).derivedSubject(token, CALLBACK_TOKEN_PREFIX)).toBeUndefined();
    expect(box.derivedSubject(token.replace(CALLBACK_TOKEN_PREFIX, API_TOKEN_PREFIX), API_TOKEN_PREFIX)).toBeUndefined();
    expect(box.derivedSubject(box.bindToken(CALLBACK_TOKEN_PREFIX, subject), CALLBACK_TOKEN_PREFIX)).toBeUndefined();
    expect(box.derivedSubject(generateToken(CALLBACK_TOKEN_PREFIX), CALLBACK_TOKEN_PREFIX)).toBeUndefined();
  });

  it('refuse every single-character change and every malformed shape', () => {
    const body = token.slice(CALLBACK_TOKEN_PREFIX.length);
    for (let index = 0; index < body.length; index += 1) {
      const changed = body.slice(0, index) + (body[index] === 'A' ? 'B' : 'A') + body.slice(index + 1);
      expect(box.derivedSubject(CALLBACK_TOKEN_PREFIX + changed, CALLBACK_TOKEN_PREFIX)).toBeUndefined();
    }
    for (const malformed of ['', CALLBACK_TOKEN_PREFIX, token.slice(0, -1), `${token}A`, ` ${token}`, token.toUpperCase()]) {
      expect(box.derivedSubject(malformed, CALLBACK_TOKEN_PREFIX)).toBeUndefined();
    }
  });
});

describe('isPlausibleToken', () => {
  it.each([
    [generateToken(API_TOKEN_PREFIX), true],
    [generateToken(CALLBACK_TOKEN_PREFIX), true],
    ['a'.repeat(20), true],
    ['a'.repeat(256), true],
    ['A-b_C-d_0123456789xyz', true],
    ['a'.repeat(19), false],
    ['a'.repeat(257), false],
    ['', false],
    ['a'.repeat(20) + ' ', false],
    ['a'.repeat(20) + '=', false],
    ['a'.repeat(20) + '.', false],
    ['a'.repeat(10) + '/' + 'a'.repeat(10), false],
  ])('%s → %s', (value, expected) => {
    expect(isPlausibleToken(value)).toBe(expected);
  });
});

describe('secret box', () => {
  const a = createSecretBox(KEY_A);
  const a2 = createSecretBox(KEY_A);
  const b = createSecretBox(KEY_B);

  it('hashToken is deterministic per key and differs between keys', () => {
    const token = generateToken(API_TOKEN_PREFIX);
    expect(a.hashToken(token)).toBe(a.hashToken(token));
    expect(a2.hashToken(token)).toBe(a.hashToken(token));
    expect(b.hashToken(token)).not.toBe(a.hashToken(token));
  });

  it('hashToken gives 64 hex characters, different for different tokens, never the token itself', () => {
    const t1 = generateToken(API_TOKEN_PREFIX);
    const t2 = generateToken(API_TOKEN_PREFIX);
    expect(a.hashToken(t1)).toMatch(/^[0-9a-f]{64}$/);
    expect(a.hashToken(t1)).not.toBe(a.hashToken(t2));
    expect(a.hashToken(t1)).not.toContain(t1.slice(API_TOKEN_PREFIX.length));
  });

  it.each(['', 'x', 'hmac-key-0123456789', 'ünïcödé ✓ 🔑', 'a'.repeat(10_000), 'with.dots.in.it'])(
    'encrypt/decrypt round-trips %#',
    (plaintext) => {
      const envelope = a.encrypt(plaintext);
      expect(envelope.split('.')[0]).toBe('v1');
      expect(a.decrypt(envelope)).toBe(plaintext);
      expect(a2.decrypt(envelope)).toBe(plaintext);
    },
  );

  it('ciphertext never contains the plaintext, in clear or base64', () => {
    const plaintext = 'super-secret-hmac-key-value-1234567890';
    const envelope = a.encrypt(plaintext);
    expect(envelope).not.toContain(plaintext);
    expect(envelope).not.toContain(Buffer.from(plaintext).toString('base64url'));
    expect(envelope).not.toContain(Buffer.from(plaintext).toString('base64'));
    expect(envelope).not.toContain(Buffer.from(plaintext).toString('hex'));
  });

  it('encrypting twice gives different envelopes (fresh IV)', () => {
    expect(a.encrypt('same')).not.toBe(a.encrypt('same'));
  });

  it('another key cannot decrypt', () => {
    expect(() => b.decrypt(a.encrypt('secret'))).toThrow();
  });

  const flip = (part: string): string => {
    const bytes = Buffer.from(part, 'base64url');
    bytes[0] = (bytes[0] ?? 0) ^ 0x01;
    return bytes.toString('base64url');
  };
  const truncate = (part: string, bytes: number): string => Buffer.from(part, 'base64url').subarray(0, bytes).toString('base64url');
  const tamper: Array<[string, (parts: string[]) => string]> = [
    ['flipped ciphertext byte', ([v, iv, tag, ct]) => [v, iv, tag, flip(ct!)].join('.')],
    ['flipped tag byte', ([v, iv, tag, ct]) => [v, iv, flip(tag!), ct].join('.')],
    ['flipped iv byte', ([v, iv, tag, ct]) => [v, flip(iv!), tag, ct].join('.')],
    ['tag truncated to 12 bytes', ([v, iv, tag, ct]) => [v, iv, truncate(tag!, 12), ct].join('.')],
    ['tag truncated to 8 bytes', ([v, iv, tag, ct]) => [v, iv, truncate(tag!, 8), ct].join('.')],
    ['tag truncated to 4 bytes', ([v, iv, tag, ct]) => [v, iv, truncate(tag!, 4), ct].join('.')],
    ['tag truncated to 6 bytes', ([v, iv, tag, ct]) => [v, iv, truncate(tag!, 6), ct].join('.')],
    ['unknown version', ([, iv, tag, ct]) => ['v2', iv, tag, ct].join('.')],
    ['missing ciphertext', ([v, iv, tag]) => [v, iv, tag].join('.')],
    ['empty iv', ([v, , tag, ct]) => [v, '', tag, ct].join('.')],
    ['empty tag', ([v, iv, , ct]) => [v, iv, '', ct].join('.')],
    ['appended ciphertext', ([v, iv, tag, ct]) => [v, iv, tag, `${ct}AAAA`].join('.')],
    ['not an envelope', () => 'garbage'],
    ['empty string', () => ''],
  ];
  it.each(tamper)('a tampered envelope throws: %s', (_name, mutate) => {
    const envelope = a.encrypt('hmac-key-to-protect');
    const tampered = mutate(envelope.split('.'));
    expect(tampered).not.toBe(envelope);
    expect(() => a.decrypt(tampered)).toThrow();
  });
});

describe('safeEqualHex', () => {
  it.each([
    ['00ff', '00ff', true],
    ['00ff', '00fe', false],
    ['00ff', '00ff00', false],
    ['', '', true],
  ])('%s vs %s → %s', (left, right, expected) => {
    expect(safeEqualHex(left, right)).toBe(expected);
  });
});
