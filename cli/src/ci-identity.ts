import { CliError } from './exit-codes.ts';

/**
 * Signing in without a stored secret (docs/sso.md): where RUNTASKS_TOKEN is unset and the CI offers
 * an OpenID Connect identity token, the CLI exchanges it at the service for a short-lived token that
 * drives the one workspace whose trust rule accepts it. GitHub Actions hands the token out on request
 * (a job with `permissions: id-token: write`); GitLab puts it in the variable its `id_tokens` names
 * (RUNTASKS_ID_TOKEN).
 */
export type IdentitySource =
  { kind: 'github'; requestUrl: string; requestToken: string } | { kind: 'variable'; name: string; token: string };

type Env = Readonly<Record<string, string | undefined>>;

export const ID_TOKEN_VARIABLE = 'RUNTASKS_ID_TOKEN';
const TIMEOUT_MS = 30_000;

/** The identity token the CI offers, or none. */
export function identitySource(env: Env): IdentitySource | undefined {
  const variable = env[ID_TOKEN_VARIABLE]?.trim();
  if (variable) return { kind: 'variable', name: ID_TOKEN_VARIABLE, token: variable };
  const requestUrl = env['ACTIONS_ID_TOKEN_REQUEST_URL'];
  const requestToken = env['ACTIONS_ID_TOKEN_REQUEST_TOKEN'];
  if (requestUrl && requestToken) return { kind: 'github', requestUrl, requestToken };
  return undefined;
}

async function fetchJson(url: string, init: RequestInit, what: string): Promise<Record<string, unknown>> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (error) {
    throw new CliError('network', `${what}: ${(error as Error).message}`);
  }
  const text = await response.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Not JSON: said below by the status.
  }
  if (!response.ok) {
    const errors = body['errors'] as { detail?: string; title?: string }[] | undefined;
    const why = errors?.[0]?.detail ?? errors?.[0]?.title ?? `HTTP ${response.status}`;
    throw new CliError(response.status === 401 || response.status === 403 ? 'auth' : 'network', `${what}: ${why}`);
  }
  return body;
}

/** GitHub's identity token for this audience (the service's address). */
async function githubIdentityToken(source: Extract<IdentitySource, { kind: 'github' }>, audience: string): Promise<string> {
  const url = new URL(source.requestUrl);
  url.searchParams.set('audience', audience);
  const body = await fetchJson(url.href, { headers: { authorization: `bearer ${source.requestToken}` } }, 'GitHub gave no identity token');
  if (typeof body['value'] !== 'string') throw new CliError('network', 'GitHub gave no identity token (no "value" in its answer)');
  return body['value'];
}

/** The service's short-lived token for the CI's identity token. */
export async function exchangeIdentity(address: string, source: IdentitySource): Promise<string> {
  const idToken = source.kind === 'github' ? await githubIdentityToken(source, address) : source.token;
  const body = await fetchJson(
    `${address}/api/v2/ci-token-exchanges`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.api+json', accept: 'application/vnd.api+json', 'user-agent': 'runtasks-cli' },
      body: JSON.stringify({ data: { type: 'ci-token-exchanges', attributes: { 'id-token': idToken } } }),
    },
    `the service refused the CI's identity token (${source.kind === 'github' ? 'GitHub Actions' : source.name})`,
  );
  const token = (body['data'] as { attributes?: { token?: unknown } } | undefined)?.attributes?.token;
  if (typeof token !== 'string') throw new CliError('network', 'the service answered the exchange without a token');
  return token;
}
