import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A CI's OpenID Connect issuer on loopback, as GitHub Actions and GitLab publish theirs: a discovery
 * document and a key set over HTTP, and identity tokens signed with the current key. `rotate()`
 * replaces the key (the old one leaves the key set), as an issuer rotating its keys does.
 */
export interface TestIssuer {
  url: string;
  /** A token with these claims (iss, iat and a 5-minute exp filled in unless given). */
  sign(claims: JWTPayload, options?: { expiresIn?: string | number; kid?: string }): Promise<string>;
  rotate(): Promise<void>;
  /** How many times the key set was fetched. */
  keyFetches(): number;
  close(): Promise<void>;
}

interface Key {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

let keyCounter = 0;
async function newKey(): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const kid = `key-${++keyCounter}`;
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } };
}

export async function startTestIssuer(): Promise<TestIssuer> {
  let key = await newKey();
  let fetches = 0;
  let url = '';
  const server: Server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/.well-known/openid-configuration') {
      res.end(JSON.stringify({ issuer: url, jwks_uri: `${url}/.well-known/jwks`, id_token_signing_alg_values_supported: ['RS256'] }));
      return;
    }
    if (req.url === '/.well-known/jwks') {
      fetches += 1;
      res.end(JSON.stringify({ keys: [key.jwk] }));
      return;
    }
    res.statusCode = 404;
    res.end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    async sign(claims, options = {}) {
      return new SignJWT({ ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: options.kid ?? key.kid, typ: 'JWT' })
        .setIssuer(claims.iss ?? url)
        .setIssuedAt()
        .setExpirationTime(options.expiresIn ?? '5m')
        .sign(key.privateKey);
    },
    async rotate() {
      key = await newKey();
    },
    keyFetches: () => fetches,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
