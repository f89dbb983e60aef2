import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';
import { startHarness, type Harness } from './harness.ts';

/**
 * A real OpenID Connect provider on loopback: `oidc-provider` (the certified Node implementation) with
 * its development login form (any password), one confidential client, PKCE required, and people whose
 * claims (email, name, groups) a test sets and changes between sign-ins. Consent is given by the
 * provider for this first-party client, so a sign-in is: the login form, then straight back.
 *
 * `tamperIdTokens` rewrites the ID token the token endpoint returns, re-signed with the provider's own
 * key (or another issuer's): what a provider mix-up or a man in the middle would hand the client.
 */
export interface Person {
  email: string;
  emailVerified?: boolean;
  name?: string;
  preferredUsername?: string;
  groups?: string[];
}

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Registers the client's redirect URI (known once the service listens). */
  setRedirectUri(uri: string): void;
  setPerson(login: string, person: Person): void;
  /**
   * From now on, each ID token the token endpoint returns is replaced by what `replace` makes of its
   * claims (`resign`: signed with the provider's own key); undefined: as issued.
   */
  tamperIdTokens(replace: ((claims: JWTPayload, resign: (claims: JWTPayload) => Promise<string>) => Promise<string>) | undefined): void;
  close(): Promise<void>;
}

export async function startTestProvider(): Promise<TestProvider> {
  const people = new Map<string, Person>();
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const kid = 'provider-key-1';
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server: Server = createServer((req, res) => (handler ? handler(req, res) : res.writeHead(503).end()));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = 'runtasks-pages';
  const clientSecret = 'runtasks-pages-secret-0123456789abcdef';
  let redirectUri = 'http://127.0.0.1/unset';
  let tamper: ((claims: JWTPayload, resign: (claims: JWTPayload) => Promise<string>) => Promise<string>) | undefined;
  const resign = (claims: JWTPayload): Promise<string> => new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(privateKey);

  const build = (): Provider => {
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          redirect_uris: [redirectUri],
          response_types: ['code'],
          grant_types: ['authorization_code'],
        },
      ],
      jwks: { keys: [privateJwk] },
      pkce: { required: () => true },
      scopes: ['openid', 'email', 'profile', 'groups'],
      claims: {
        openid: ['sub'],
        email: ['email', 'email_verified'],
        profile: ['name', 'preferred_username'],
        groups: ['groups'],
      },
      cookies: { keys: ['test-provider-cookie-key-0123456789'] },
      features: { devInteractions: { enabled: true } },
      findAccount: (_ctx, login) => {
        const person = people.get(login);
        if (!person) return undefined;
        return {
          accountId: login,
          claims: () => ({
            sub: login,
            email: person.email,
            email_verified: person.emailVerified ?? true,
            name: person.name,
            preferred_username: person.preferredUsername,
            // Read at each sign-in: a change between sign-ins is what the next one sees.
            groups: people.get(login)?.groups ?? [],
          }),
        };
      },
      // A first-party client: the provider grants what it asks for without a consent screen.
      loadExistingGrant: async (ctx) => {
        const session = ctx.oidc.session;
        const client = ctx.oidc.client;
        if (!session?.accountId || !client) return undefined;
        const grant = new ctx.oidc.provider.Grant({ clientId: client.clientId, accountId: session.accountId });
        grant.addOIDCScope('openid email profile groups');
        grant.addOIDCClaims(['email', 'email_verified', 'name', 'preferred_username', 'groups']);
        await grant.save();
        return grant;
      },
    });
    provider.use(async (ctx, next) => {
      await next();
      const body = ctx.body as { id_token?: string } | undefined;
      if (ctx.path === '/token' && tamper && body && typeof body.id_token === 'string') {
        ctx.body = { ...body, id_token: await tamper(decodeJwt(body.id_token), resign) };
      }
    });
    return provider;
  };

  const rebuild = (): void => {
    handler = build().callback();
  };
  rebuild();

  return {
    issuer,
    clientId,
    clientSecret,
    setRedirectUri(uri) {
      redirectUri = uri;
      rebuild();
    },
    setPerson(login, person) {
      people.set(login, person);
    },
    tamperIdTokens(replace) {
      tamper = replace;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A browser's cookies, by origin (enough for loopback servers: no domains, paths or expiry). */
export class CookieJar {
  private readonly jars = new Map<string, Map<string, string>>();

  header(url: string): string {
    return [...(this.jars.get(new URL(url).origin) ?? new Map<string, string>())].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  take(url: string, response: Response): void {
    const jar = this.jars.get(new URL(url).origin) ?? new Map<string, string>();
    for (const line of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';');
      const index = pair.indexOf('=');
      const name = pair.slice(0, index).trim();
      const value = pair.slice(index + 1).trim();
      const expired = attributes.some((attribute) => /^\s*max-age=0\s*$/i.test(attribute)) || value === '';
      if (expired) jar.delete(name);
      else jar.set(name, value);
    }
    this.jars.set(new URL(url).origin, jar);
  }

  get(url: string, name: string): string | undefined {
    return this.jars.get(new URL(url).origin)?.get(name);
  }

  delete(url: string, name: string): void {
    this.jars.get(new URL(url).origin)?.delete(name);
  }
}

/**
 * One request of a browser that follows no redirect by itself: its cookies sent and kept. Like a
 * well-behaved client it waits out a 429 (the service's default rate limit counts sign-ins per
 * address, and a suite signs in many times a second) for its Retry-After, then asks again.
 */
export async function browse(
  jar: CookieJar,
  url: string,
  init: { method?: string; form?: Record<string, string> } = {},
): Promise<Response> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const headers: Record<string, string> = { cookie: jar.header(url) };
    let body: string | undefined;
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    const response = await fetch(url, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
    const wait = Number(response.headers.get('retry-after'));
    if (response.status === 429 && Number.isFinite(wait) && Date.now() + wait * 1000 < deadline) {
      await response.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, Math.max(wait, 0.05) * 1000));
      continue;
    }
    jar.take(url, response);
    return response;
  }
}

/** Where a redirect leads, absolute. */
export const locationOf = (url: string, response: Response): string => new URL(response.headers.get('location') ?? '', url).href;

/**
 * A person's sign-in at the provider over HTTP, from the service's "Sign in with SSO" link to the
 * moment the provider sends the browser back: returns the callback URL (with code and state), not
 * yet visited, so a test may change it first.
 */
export async function signInAtProvider(jar: CookieJar, apiUrl: string, login: string, next?: string): Promise<string> {
  const start = `${apiUrl}/session/oidc${next ? `?next=${encodeURIComponent(next)}` : ''}`;
  const left = await browse(jar, start);
  if (left.status !== 303) throw new Error(`start: ${left.status} ${await left.text()}`);
  let url = locationOf(start, left);
  // The provider: its authorization endpoint, its login form, back to the authorization endpoint, then to the callback.
  for (let step = 0; step < 8; step += 1) {
    if (url.startsWith(`${apiUrl}/`)) return url;
    const response = await browse(jar, url);
    if (response.status >= 300 && response.status < 400) {
      url = locationOf(url, response);
      continue;
    }
    const page = await response.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1];
    if (response.status !== 200 || !action) throw new Error(`provider: ${response.status} ${page.slice(0, 500)}`);
    const submitUrl = new URL(action.replace(/&amp;/g, '&'), url).href;
    const submitted = await browse(jar, submitUrl, { method: 'POST', form: { prompt: 'login', login, password: 'any password' } });
    if (submitted.status < 300 || submitted.status >= 400) throw new Error(`login: ${submitted.status} ${await submitted.text()}`);
    url = locationOf(submitUrl, submitted);
  }
  throw new Error('the provider did not send the browser back');
}

/**
 * The API as `npm start` builds it (default limits on), with run-page single sign-on against
 * `provider` (the groups claim mapping teams), and the provider told the API's callback address.
 */
export async function startSsoHarness(provider: TestProvider): Promise<Harness> {
  const h = await startHarness({
    ops: true,
    reachableBaseUrl: true,
    env: {
      OIDC_ISSUER: provider.issuer,
      OIDC_CLIENT_ID: provider.clientId,
      OIDC_CLIENT_SECRET: provider.clientSecret,
      OIDC_SCOPES: 'openid email profile groups',
      OIDC_TEAMS_CLAIM: 'groups',
    },
  });
  provider.setRedirectUri(`${h.baseUrl}/session/oidc/callback`);
  return h;
}
