import { isLoopbackName, type Config } from '@runtasks/shared/config';
import * as client from 'openid-client';
import { SSO_CALLBACK_PATH } from '../layout.ts';

/**
 * This service as an OpenID Connect relying party (docs/sso.md, "People signing in to the run pages"),
 * with openid-client, a certified implementation: the authorization-code flow with PKCE (S256), a
 * state and a nonce. Only the protocol is here; where the values wait between the two legs
 * (sign-in-state.ts) and what a verified identity becomes (services/sso-sign-in.service.ts) are not.
 */

export type OidcSettings = NonNullable<Config['oidc']>;

/** What the browser's first leg leaves behind for its return: all three are checked by openid-client there. */
export interface PendingSignIn {
  state: string;
  nonce: string;
  codeVerifier: string;
}

/** What the provider says about the person, from a verified ID token and its user info endpoint. */
export interface VerifiedIdentity {
  issuer: string;
  subject: string;
  email: string | null;
  emailVerified: boolean;
  preferredUsername: string | null;
  name: string | null;
  /** All claims (the ID token's, then user info's for the same subject): the teams claim is read from here. */
  claims: Readonly<Record<string, unknown>>;
}

/** The provider refused, or its answer did not verify (state, nonce, issuer, audience, PKCE): the browser's sign-in fails. */
export class SignInRefused extends Error {
  readonly reason: string;
  constructor(reason: string, options?: { cause?: unknown }) {
    super(reason, options);
    this.reason = reason;
  }
}

/** The provider could not be reached or answered nonsense: nobody is at fault in the browser. */
export class ProviderUnavailable extends Error {}

const redirectUri = (publicBaseUrl: string): string => `${publicBaseUrl}${SSO_CALLBACK_PATH}`;

/**
 * The provider's metadata, fetched once per process (discovery) and kept; a failed discovery is
 * forgotten, so the next sign-in asks again. Plain `http://` is allowed only for a loopback issuer
 * (development, the compose profile and the tests' in-process provider); any other must be https.
 */
export class RelyingParty {
  private configuration: Promise<client.Configuration> | undefined;
  readonly settings: OidcSettings;
  private readonly publicBaseUrl: () => string;

  constructor(settings: OidcSettings, publicBaseUrl: () => string) {
    this.settings = settings;
    this.publicBaseUrl = publicBaseUrl;
  }

  private discover(): Promise<client.Configuration> {
    this.configuration ??= (async () => {
      const issuer = new URL(this.settings.issuer);
      // Loopback names (and *.localhost, which browsers keep on loopback: the compose profile's provider).
      const loopback = isLoopbackName(issuer.hostname);
      try {
        return await client.discovery(issuer, this.settings.clientId, this.settings.clientSecret, undefined, {
          timeout: 10,
          ...(issuer.protocol === 'http:' && loopback ? { execute: [client.allowInsecureRequests] } : {}),
        });
      } catch (error) {
        this.configuration = undefined;
        throw new ProviderUnavailable(`The identity provider's configuration could not be read from ${issuer.origin}.`, { cause: error });
      }
    })();
    return this.configuration;
  }

  /** The first leg: the provider's authorization URL, with what its return is checked against. */
  async begin(): Promise<{ url: URL; pending: PendingSignIn }> {
    const configuration = await this.discover();
    const pending: PendingSignIn = {
      state: client.randomState(),
      nonce: client.randomNonce(),
      codeVerifier: client.randomPKCECodeVerifier(),
    };
    const url = client.buildAuthorizationUrl(configuration, {
      redirect_uri: redirectUri(this.publicBaseUrl()),
      scope: this.settings.scopes,
      response_type: 'code',
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(pending.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, pending };
  }

  /**
   * The return: `search` is the callback's query as the provider sent the browser back. openid-client
   * checks the state, exchanges the code with the PKCE verifier, and checks the ID token (issuer,
   * audience, nonce, expiry); user info for the same subject adds the claims a provider keeps there.
   */
  async finish(search: string, pending: PendingSignIn): Promise<VerifiedIdentity> {
    const configuration = await this.discover();
    const callback = new URL(redirectUri(this.publicBaseUrl()));
    callback.search = search;
    let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
    try {
      tokens = await client.authorizationCodeGrant(configuration, callback, {
        pkceCodeVerifier: pending.codeVerifier,
        expectedState: pending.state,
        expectedNonce: pending.nonce,
        idTokenExpected: true,
      });
    } catch (error) {
      throw refusalOf(error);
    }
    const idToken = tokens.claims();
    if (!idToken) throw new SignInRefused('The identity provider sent no ID token.');
    let userInfo: Record<string, unknown>;
    try {
      userInfo = await client.fetchUserInfo(configuration, tokens.access_token, idToken.sub);
    } catch (error) {
      throw refusalOf(error);
    }
    const claims: Record<string, unknown> = { ...idToken, ...userInfo };
    const text = (name: string): string | null =>
      typeof claims[name] === 'string' && claims[name] !== '' ? (claims[name] as string) : null;
    return {
      issuer: idToken.iss,
      subject: idToken.sub,
      email: text('email'),
      emailVerified: claims['email_verified'] === true,
      preferredUsername: text('preferred_username'),
      name: text('name'),
      claims,
    };
  }
}

/** A failure of the exchange, as the browser's sign-in sees it: the provider or its answer refused (4xx), or it was unreachable. */
function refusalOf(error: unknown): Error {
  if (error instanceof client.AuthorizationResponseError)
    return new SignInRefused(`The identity provider refused the sign-in (${error.error}).`, { cause: error });
  if (error instanceof client.ResponseBodyError)
    return new SignInRefused(`The identity provider refused the sign-in (${error.error}).`, { cause: error });
  if (error instanceof client.ClientError) {
    // openid-client's checks of the answer: a wrong state, nonce, issuer or audience, or a missing code.
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return new SignInRefused(`The identity provider's answer did not verify (${error.message}${cause}).`, { cause: error });
  }
  return new ProviderUnavailable('The identity provider could not be reached.', { cause: error });
}
