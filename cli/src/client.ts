import { CliError, exitKindForStatus } from './exit-codes.ts';
import { backoffMs, describeNetworkError, retryAfterMs, type NetworkFailure } from './retry.ts';

/** A JSON:API resource as the service sends it. */
export interface Resource {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, { data: unknown } | undefined>;
  links?: Record<string, string>;
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
  /** Headers of this request (Idempotency-Key, the plan file's hash). */
  headers?: Record<string, string>;
  /**
   * Whether the request may be sent again after a lost connection or a 429/502/503/504. Reads and PUTs
   * may; a POST only where sending it twice does no harm (an idempotency key, a report the service takes
   * once, an action whose 409 the caller reads as done).
   */
  retry?: boolean;
}

/** Hears when the service is lost and found again, for the one line each. */
export interface ConnectionListener {
  lost(reason: string, until: Date): void;
  regained(downMs: number): void;
}

const REQUEST_TIMEOUT_MS = 30_000;
/** Statuses a proxy or the service answers while it restarts or sheds load: the request was not done. */
const TRANSIENT = new Set([429, 502, 503, 504]);

export class ApiRefusal extends CliError {
  readonly status: number;
  /** The first error object's detail, where the service sent one. */
  readonly detail: string | undefined;
  constructor(status: number, message: string, detail?: string) {
    super(exitKindForStatus(status), message);
    this.status = status;
    this.detail = detail;
  }
}

function errorsOf(text: string): ErrorObject[] {
  try {
    const body = JSON.parse(text) as { errors?: ErrorObject[] };
    return Array.isArray(body.errors) ? body.errors : [];
  } catch {
    // Not JSON (a proxy's page, say): the status alone says enough.
    return [];
  }
}

/** One line from a JSON:API error document: title, detail and where. */
export function describeErrors(status: number, text: string): string {
  const first = errorsOf(text)[0];
  if (!first) return `HTTP ${status}`;
  const where = first.source?.pointer ?? first.source?.parameter;
  const detail = first.detail && first.detail !== first.title ? `: ${first.detail}` : '';
  return `${first.title ?? `HTTP ${status}`}${detail}${where ? ` (at ${where})` : ''}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What the service's /ping says about it. */
export interface ServiceIdentity {
  /** `X-Runtasks-Version`: only this service sends it (HCP Terraform and TFE do not). */
  version: string | undefined;
}

/**
 * The service's API over fetch: a bearer token, JSON:API, one-line errors mapped to exit codes. A lost
 * connection or a 429/502/503/504 is retried with a capped backoff (Retry-After honoured) until the
 * deadline, the command's --timeout; before the service has answered once, a refused connection, an
 * unknown host or a TLS mismatch fail at once (the address is wrong, and nothing was done yet).
 */
export class Client {
  readonly address: string;
  private readonly token: string;
  private deadline = Number.POSITIVE_INFINITY;
  private listener: ConnectionListener | undefined;
  private reached = false;
  private lostAt: number | undefined;

  constructor(address: string, token: string) {
    this.address = address;
    this.token = token;
  }

  /** Retry until `deadline` (epoch ms), telling `listener` when the service is lost and found again. */
  retryUntil(deadline: number, listener?: ConnectionListener): void {
    this.deadline = deadline;
    this.listener = listener;
  }

  /** An API path (`/runs/…`) or an absolute URL (the upload URL). */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return (await this.exchange<T>(method, path, options)).body;
  }

  /**
   * As `request`, with the answer's status (201 for a run created, 200 for one found by its idempotency key)
   * and whether the service answered a repeat of a request it had taken before (`Idempotent-Replayed: true`).
   */
  async exchange<T>(method: string, path: string, options: RequestOptions = {}): Promise<{ status: number; body: T; replayed: boolean }> {
    const url = path.startsWith('/') ? `${this.address}/api/v2${path}` : path;
    // The upload URL is a secret (it needs no token): it is never shown, whatever quotes it.
    const shown = options.anonymous || !url.startsWith(this.address) ? 'the upload URL' : url.slice(this.address.length);
    const hide = hider(options.anonymous ? url : undefined, shown);
    const retry = options.retry ?? method !== 'POST';
    for (let attempt = 0; ; attempt += 1) {
      let failure: { reason: string; waitMs: number | undefined; error: CliError };
      try {
        const response = await this.send(method, url, options);
        const text = await response.text();
        if (response.ok) {
          this.answered();
          return {
            status: response.status,
            body: parseBody<T>(text, method, shown, this.address),
            replayed: response.headers.get('idempotent-replayed') === 'true',
          };
        }
        const refusal = this.refusal(method, shown, response.status, hide(text), options);
        if (!retry || !TRANSIENT.has(response.status)) {
          this.answered();
          throw refusal;
        }
        failure = { reason: `${response.status}`, waitMs: retryAfterMs(response.headers.get('retry-after'), Date.now()), error: refusal };
      } catch (error) {
        if (error instanceof CliError) throw error;
        const network = describeNetworkError(error, this.address, REQUEST_TIMEOUT_MS);
        const lost = new CliError('network', hide(network.message));
        if (!retry || !this.mayRetry(network, url.startsWith(this.address))) throw lost;
        failure = { reason: network.reason, waitMs: undefined, error: lost };
      }
      const wait = failure.waitMs ?? backoffMs(attempt);
      if (Date.now() + wait > this.deadline) {
        throw new CliError('network', `${failure.error.message}; gave up at --timeout`);
      }
      if (this.lostAt === undefined) {
        this.lostAt = Date.now();
        this.listener?.lost(failure.reason, new Date(this.deadline));
      }
      await sleep(wait);
    }
  }

  /**
   * Checks the address is this service before anything else (HCP's `/ping` with its `TFP-API-Version`
   * header), so a wrong address is one clear line rather than a puzzling 404 later. Anonymous: the token
   * goes nowhere until the answer says where it is.
   */
  async ping(): Promise<ServiceIdentity> {
    const url = `${this.address}/api/v2/ping`;
    for (let attempt = 0; ; attempt += 1) {
      let response: Response;
      try {
        response = await this.send('GET', url, { anonymous: true });
      } catch (error) {
        const network = describeNetworkError(error, this.address, REQUEST_TIMEOUT_MS);
        if (!this.mayRetry(network) || Date.now() + backoffMs(attempt) > this.deadline) throw new CliError('network', network.message);
        await this.waitLost(network.reason, backoffMs(attempt));
        continue;
      }
      await response.body?.cancel();
      if (TRANSIENT.has(response.status)) {
        const wait = retryAfterMs(response.headers.get('retry-after'), Date.now()) ?? backoffMs(attempt);
        if (Date.now() + wait > this.deadline) {
          throw new CliError('network', `the service at ${this.address} is unavailable (GET /api/v2/ping answered ${response.status})`);
        }
        await this.waitLost(String(response.status), wait);
        continue;
      }
      if (response.status >= 500) {
        throw new CliError('network', `the service at ${this.address} is unavailable (GET /api/v2/ping answered ${response.status})`);
      }
      if (!response.ok || !response.headers.get('tfp-api-version')) {
        throw new CliError(
          'network',
          `${this.address} does not look like the Run Tasks service (GET /api/v2/ping answered ${response.status}): check RUNTASKS_ADDRESS`,
        );
      }
      this.answered();
      return { version: response.headers.get('x-runtasks-version') ?? undefined };
    }
  }

  private async waitLost(reason: string, ms: number): Promise<void> {
    if (this.lostAt === undefined) {
      this.lostAt = Date.now();
      this.listener?.lost(reason, new Date(this.deadline));
    }
    await sleep(ms);
  }

  /** A failure worth waiting out: any lost connection once the service has answered; before that, only those a restart causes. */
  /**
   * Whether a failure without an answer is worth another try: a reset or a timeout always is; a refused
   * connection only where the service answered before at that very address (a restart), not at an address
   * it was never reached at (a wrong address, or an upload URL elsewhere that nothing listens on).
   */
  private mayRetry(network: NetworkFailure, ownAddress = true): boolean {
    if (network.kind === 'fatal') return false;
    return (this.reached && ownAddress) || network.kind === 'transient';
  }

  private answered(): void {
    this.reached = true;
    if (this.lostAt !== undefined) {
      const down = Date.now() - this.lostAt;
      this.lostAt = undefined;
      this.listener?.regained(down);
    }
  }

  private async send(method: string, url: string, options: RequestOptions): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/vnd.api+json', 'user-agent': 'runtasks-cli', ...options.headers };
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
    return await fetch(url, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
  }

  private refusal(method: string, shown: string, status: number, text: string, options: RequestOptions): CliError {
    const what = `${method} ${shown}`;
    const detail = errorsOf(text)[0]?.detail;
    if (status === 401) return new ApiRefusal(401, `the service refused the token (401): check RUNTASKS_TOKEN`, detail);
    if (status === 404 && options.notFound) return new ApiRefusal(404, options.notFound, detail);
    // The service names the permission the token lacks: that sentence is the whole story.
    if (status === 403 && detail) return new ApiRefusal(403, `${what} was refused (403): ${detail}`, detail);
    if (status >= 300 && status < 400) {
      return new ApiRefusal(502, `${what} was redirected (${status}): is ${this.address} the service's address?`, detail);
    }
    return new ApiRefusal(status, `${what} answered ${status}: ${describeErrors(status, text)}`, detail);
  }
}

function parseBody<T>(text: string, method: string, shown: string, address: string): T {
  if (!text) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new CliError('network', `${method} ${shown} answered something that is not JSON: is ${address} the service's address?`);
  }
}

/** Replaces a secret URL by how it is shown, wherever a text quotes it (or its path, as servers do). */
function hider(secretUrl: string | undefined, shown: string): (text: string) => string {
  if (!secretUrl) return (text) => text;
  let path = '';
  try {
    const parsed = new URL(secretUrl);
    path = `${parsed.pathname}${parsed.search}`;
  } catch {
    // Not a URL at all: only its whole text can be quoted.
  }
  const forms = [secretUrl, path].filter((form) => form.length > 1);
  return (text) => forms.reduce((hidden, form) => hidden.split(form).join(shown), text);
}
