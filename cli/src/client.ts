import { CliError, exitKindForStatus } from './exit-codes.ts';

/** A JSON:API resource as the service sends it. */
export interface Resource {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, { data: unknown } | undefined>;
}

export interface Document<T = Resource> {
  data: T;
  included?: Resource[];
}

interface ErrorObject {
  status?: string;
  title?: string;
  detail?: string;
  source?: { pointer?: string; parameter?: string };
}

export interface RequestOptions {
  /** JSON:API (default), plain JSON (action bodies), raw bytes (a plan, an archive). */
  body?: { json: unknown } | { jsonApi: unknown } | { raw: Uint8Array; contentType: string };
  /** Send no token (the upload URL carries its own secret). */
  anonymous?: boolean;
  /** What a 404 means here, for the one-line error. */
  notFound?: string;
}

const REQUEST_TIMEOUT_MS = 30_000;
/** 429 (and 503 for GET and PUT) are retried after Retry-After (at most this long each), this many times. */
const RETRIES = 5;
const MAX_RETRY_WAIT_MS = 30_000;

export class ApiRefusal extends CliError {
  readonly status: number;
  constructor(status: number, message: string) {
    super(exitKindForStatus(status), message);
    this.status = status;
  }
}

/** One line from a JSON:API error document: title, detail and where. */
export function describeErrors(status: number, text: string): string {
  let errors: ErrorObject[] = [];
  try {
    const body = JSON.parse(text) as { errors?: ErrorObject[] };
    errors = Array.isArray(body.errors) ? body.errors : [];
  } catch {
    // Not JSON (a proxy's page, say): the status alone says enough.
  }
  const first = errors[0];
  if (!first) return `HTTP ${status}`;
  const where = first.source?.pointer ?? first.source?.parameter;
  const detail = first.detail && first.detail !== first.title ? `: ${first.detail}` : '';
  return `${first.title ?? `HTTP ${status}`}${detail}${where ? ` (at ${where})` : ''}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The service's API over fetch: a bearer token, JSON:API, one-line errors mapped to exit codes. */
export class Client {
  readonly address: string;
  private readonly token: string;

  constructor(address: string, token: string) {
    this.address = address;
    this.token = token;
  }

  /** An API path (`/runs/…`) or an absolute URL (the upload URL). */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = path.startsWith('/') ? `${this.address}/api/v2${path}` : path;
    for (let attempt = 0; ; attempt += 1) {
      const response = await this.send(method, url, options);
      const text = await response.text();
      if (response.ok) return parseBody<T>(text, method, url, this.address);
      // A 429 was refused before any work; a 503 may come after it, so only requests safe to repeat retry it.
      const retryable = response.status === 429 || (response.status === 503 && (method === 'GET' || method === 'PUT'));
      if (retryable && attempt < RETRIES) {
        const after = Number(response.headers.get('retry-after'));
        await sleep(Number.isFinite(after) && after > 0 ? Math.min(after * 1000, MAX_RETRY_WAIT_MS) : 1000 * 2 ** attempt);
        continue;
      }
      throw this.refusal(method, url, response.status, text, options);
    }
  }

  /**
   * Checks the address is this service before anything else (HCP's `/ping` with its `TFP-API-Version`
   * header), so a wrong address is one clear line rather than a puzzling 404 later.
   */
  async ping(): Promise<void> {
    const response = await this.send('GET', `${this.address}/api/v2/ping`, { anonymous: true });
    await response.body?.cancel();
    if (response.status >= 500 || response.status === 429) {
      throw new CliError('network', `the service at ${this.address} is unavailable (GET /api/v2/ping answered ${response.status})`);
    }
    if (!response.ok || !response.headers.get('tfp-api-version')) {
      throw new CliError(
        'network',
        `${this.address} does not look like the Run Tasks service (GET /api/v2/ping answered ${response.status}): check RUNTASKS_ADDRESS`,
      );
    }
  }

  private async send(method: string, url: string, options: RequestOptions): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/vnd.api+json', 'user-agent': 'runtasks-cli' };
    if (!options.anonymous) headers['authorization'] = `Bearer ${this.token}`;
    let body: string | Uint8Array | undefined;
    const given = options.body;
    if (given && 'jsonApi' in given) {
      headers['content-type'] = 'application/vnd.api+json';
      body = JSON.stringify(given.jsonApi);
    } else if (given && 'json' in given) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(given.json);
    } else if (given) {
      headers['content-type'] = given.contentType;
      body = given.raw;
    }
    try {
      return await fetch(url, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    } catch (error) {
      throw new CliError('network', `cannot reach the service at ${this.address}: ${networkReason(error)}`);
    }
  }

  private refusal(method: string, url: string, status: number, text: string, options: RequestOptions): CliError {
    const what = `${method} ${url.startsWith(this.address) ? url.slice(this.address.length) : 'the upload URL'}`;
    if (status === 401) return new ApiRefusal(401, `the service refused the token (401): check RUNTASKS_TOKEN (or TFE_TOKEN)`);
    if (status === 404 && options.notFound) return new ApiRefusal(404, options.notFound);
    if (status >= 300 && status < 400) {
      return new ApiRefusal(502, `${what} was redirected (${status}): is ${this.address} the service's address?`);
    }
    return new ApiRefusal(status, `${what} answered ${status}: ${describeErrors(status, text)}`);
  }
}

function parseBody<T>(text: string, method: string, url: string, address: string): T {
  if (!text) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new CliError('network', `${method} ${url} answered something that is not JSON: is ${address} the service's address?`);
  }
}

/** The cause of a failed fetch in words: undici hides it in `cause`. */
function networkReason(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  if ((error as Error).name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 1000} s`;
  if (cause?.code === 'ECONNREFUSED') return 'connection refused';
  if (cause?.code === 'ENOTFOUND' || cause?.code === 'EAI_AGAIN') return 'unknown host';
  return cause?.message ?? (error as Error).message ?? String(error);
}
