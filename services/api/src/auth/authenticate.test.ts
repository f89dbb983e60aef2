import { describe, expect, it } from '@jest/globals';
import { API_TOKEN_PREFIX, createSecretBox, generateToken } from '@runtasks/shared/security';
import { createHash } from 'node:crypto';
import { principalMemoKey } from './authenticate.ts';

describe('principalMemoKey: what the principal cache files a token under', () => {
  const tokens = Array.from({ length: 50 }, () => generateToken(API_TOKEN_PREFIX));

  it('is the same for the same token and different for different tokens', () => {
    const keys = tokens.map(principalMemoKey);
    expect(tokens.map(principalMemoKey)).toEqual(keys);
    expect(new Set(keys).size).toBe(tokens.length);
  });

  it('holds neither the token nor any part of its secret', () => {
    for (const token of tokens) {
      const key = principalMemoKey(token);
      expect(key).toMatch(/^[A-Za-z0-9+/]{43}=$/);
      expect(key).not.toContain(token.slice(API_TOKEN_PREFIX.length, API_TOKEN_PREFIX.length + 8));
    }
  });

  it("is not the token's unsalted digest, which a guess at a chosen token could be checked against", () => {
    const chosen = 'an-operator-chosen-admin-token';
    expect(principalMemoKey(chosen)).not.toBe(createHash('sha256').update(chosen).digest('base64'));
  });

  it('is not the keyed hash the database stores', () => {
    const secrets = createSecretBox('a-service-secret-key-of-forty-characters');
    for (const token of tokens) {
      expect(Buffer.from(principalMemoKey(token), 'base64').toString('hex')).not.toBe(secrets.hashToken(token));
    }
  });
});
