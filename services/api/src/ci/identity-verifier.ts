import { ApiError } from '@runtasks/shared/errors';
import { createRemoteJWKSet, decodeJwt, errors, jwtVerify, type JWTPayload } from 'jose';

/**
 * Verifies a CI's OpenID Connect identity token (GitHub Actions, GitLab, any issuer the site admin
 * allows in CI_TOKEN_ISSUERS) against its issuer's published keys: found through the issuer's
 * discovery document, kept, and fetched again when a token names a key that is not there (the
 * issuer rotated its keys). Signature, `iss`, `exp` and `nbf` are checked here; the audience and the
 * other claims are the trust rules' business.
 */
export interface VerifiedIdentity {
  issuer: string;
  audiences: string[];
  claims: JWTPayload;
}

export interface IdentityVerifierOptions {
  issuers: readonly string[];
  /** Per request to the issuer (discovery, keys). */
  timeoutMs?: number;
  /** How long a discovery document and a key set are kept. */
  cacheMs?: number;
  /** The least time between two fetches of a key set for an unknown key (a flood of made-up keys fetches once). */
  refetchCooldownMs?: number;
}

/** Signature algorithms of the issuers' keys: asymmetric only (a shared secret would be no proof of anything). */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];
/** Clocks of the CI and of this service may differ by this much. */
const CLOCK_TOLERANCE_SECONDS = 30;

const refused = (detail: string): ApiError => new ApiError(401, 'unauthorized', detail);

/** Plain http only on loopback (a test's or a developer's issuer); everywhere else https. */
function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(url.hostname);
}

function issuerUrl(issuer: string): URL {
  const url = new URL(issuer);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url)))
    throw new Error(`issuer ${issuer} must be https (http only on loopback)`);
  return url;
}

type KeySet = ReturnType<typeof createRemoteJWKSet>;

export function createIdentityVerifier(options: IdentityVerifierOptions) {
  const allowed = new Set(options.issuers);
  const timeoutMs = options.timeoutMs ?? 5000;
  const cacheMs = options.cacheMs ?? 3_600_000;
  const cooldownMs = options.refetchCooldownMs ?? 5000;
  const keySets = new Map<string, { keys: KeySet; until: number }>();

  /** The issuer's key set, from its discovery document: the keys must be served by the issuer's own origin. */
  async function discover(issuer: string): Promise<KeySet> {
    const base = issuerUrl(issuer);
    const url = new URL(`${base.href.replace(/\/+$/, '')}/.well-known/openid-configuration`);
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'error' });
    if (!response.ok) throw new Error(`discovery answered ${response.status}`);
    const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
    if (document.issuer !== issuer) throw new Error('the discovery document names another issuer');
    if (typeof document.jwks_uri !== 'string') throw new Error('the discovery document has no jwks_uri');
    const jwks = new URL(document.jwks_uri);
    if (jwks.origin !== base.origin) throw new Error('the key set is not served by the issuer');
    return createRemoteJWKSet(jwks, { timeoutDuration: timeoutMs, cooldownDuration: cooldownMs, cacheMaxAge: cacheMs });
  }

  async function keysOf(issuer: string): Promise<KeySet> {
    const kept = keySets.get(issuer);
    if (kept && kept.until > Date.now()) return kept.keys;
    let keys: KeySet;
    try {
      keys = await discover(issuer);
    } catch (error) {
      throw new ApiError(503, 'issuer unavailable', `The issuer's keys could not be fetched (${(error as Error).message}); try again.`);
    }
    keySets.set(issuer, { keys, until: Date.now() + cacheMs });
    return keys;
  }

  return {
    async verify(token: string): Promise<VerifiedIdentity> {
      let issuer: unknown;
      try {
        issuer = decodeJwt(token).iss;
      } catch {
        throw refused('The identity token is not a JWT.');
      }
      if (typeof issuer !== 'string' || !allowed.has(issuer))
        throw refused(`The identity token's issuer is not one this service trusts (CI_TOKEN_ISSUERS).`);
      const keys = await keysOf(issuer);
      try {
        const { payload } = await jwtVerify(token, keys, {
          issuer,
          algorithms: ALGORITHMS,
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          requiredClaims: ['exp'],
        });
        const audiences = typeof payload.aud === 'string' ? [payload.aud] : (payload.aud ?? []);
        return { issuer, audiences, claims: payload };
      } catch (error) {
        throw refused(verificationFailure(error));
      }
    },
  };
}

export type IdentityVerifier = ReturnType<typeof createIdentityVerifier>;

/** Why a token was refused, in words that name no key and no claim value. */
function verificationFailure(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'The identity token has expired.';
  if (error instanceof errors.JWTClaimValidationFailed) return `The identity token's "${error.claim}" claim is not valid now.`;
  if (error instanceof errors.JWKSNoMatchingKey) return "The identity token was not signed with any of its issuer's keys.";
  if (error instanceof errors.JWSSignatureVerificationFailed) return "The identity token's signature does not verify.";
  if (error instanceof errors.JOSEAlgNotAllowed) return "The identity token's signature algorithm is not accepted.";
  if (error instanceof errors.JWKSTimeout) return "The issuer's keys could not be fetched in time; try again.";
  return 'The identity token could not be verified.';
}
