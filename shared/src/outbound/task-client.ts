import type { lookup as dnsLookup } from 'node:dns';
import { Agent, request, type Dispatcher } from 'undici';
import { createDestinationGuard, literalAddress, type DestinationGuard } from './destination-guard.ts';
import { parseRetryAfter } from './retry-after.ts';
import { taskSignature } from './signing.ts';

export const USER_AGENT = 'runtasks/0.1 (+https://github.com/runtasks; TFC-compatible)';
export const RESPONSE_BODY_LIMIT = 64 * 1024;

/** How one POST to a task server ended. Only a 200 response acknowledges. */
export type DeliveryOutcome =
  | {
      kind: 'response';
      status: number;
      bodyExcerpt: string;
      durationMs: number;
      /** What a `Retry-After` header asked for (ms), on an answer that is not 200. */
      retryAfterMs?: number;
    }
  | { kind: 'error'; errorKind: DeliveryErrorKind; message: string; durationMs: number };

export type DeliveryErrorKind = 'blocked' | 'dns' | 'refused' | 'timeout' | 'tls' | 'reset' | 'invalid_url' | 'other';

export interface TaskClientOptions {
  allowlist: readonly string[];
  connectTimeoutMs?: number;
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** Injected in unit tests (undici MockAgent); production builds the guarded Agent. */
  dispatcher?: Dispatcher;
  /** The resolver the guard asks for names; tests give DNS answers of their choosing. The system's by default. */
  resolve?: typeof dnsLookup;
}

export interface TaskClient {
  guard: DestinationGuard;
  post(url: string, body: Buffer, hmacKey: string | null, signal?: AbortSignal): Promise<DeliveryOutcome>;
  /** The same guarded POST of a JSON body with headers of the caller's (notifications sign with their own header). */
  send(url: string, body: Buffer, headers: Record<string, string>, signal?: AbortSignal): Promise<DeliveryOutcome>;
  close(): Promise<void>;
}

function classify(error: unknown): DeliveryErrorKind {
  const code = (error as { code?: string }).code ?? '';
  const name = (error as { name?: string }).name ?? '';
  const causeCode = ((error as { cause?: { code?: string } }).cause?.code ?? '') as string;
  const codes = `${code} ${causeCode}`;
  if (codes.includes('EBLOCKEDDESTINATION') || name === 'BlockedDestinationError') return 'blocked';
  if (/ENOTFOUND|EAI_AGAIN/.test(codes)) return 'dns';
  if (/ECONNREFUSED/.test(codes)) return 'refused';
  if (/TIMEOUT|ETIMEDOUT|AbortError/i.test(`${codes} ${name}`)) return 'timeout';
  if (/CERT|TLS|SSL|ERR_TLS/i.test(codes)) return 'tls';
  if (/ECONNRESET|EPIPE|UND_ERR_SOCKET|UND_ERR_CLOSED/.test(codes)) return 'reset';
  return 'other';
}

/** Reads at most `limit` bytes of a response body, then stops reading (never buffers an endless body). */
async function readCapped(body: Dispatcher.ResponseData['body'], limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = Buffer.from(chunk as Uint8Array);
    chunks.push(buffer.subarray(0, Math.max(0, limit - size)));
    size += buffer.length;
    if (size >= limit) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The one outbound HTTP client for task servers, used by the API (verification) and the worker
 * (dispatch): guarded destinations, bounded timeouts, no redirects, capped response bodies.
 */
export function createTaskClient(options: TaskClientOptions): TaskClient {
  const guard = createDestinationGuard(options.allowlist, options.resolve);
  const dispatcher =
    options.dispatcher ??
    new Agent({
      connections: 64,
      headersTimeout: options.headersTimeoutMs ?? 10_000,
      bodyTimeout: options.bodyTimeoutMs ?? 10_000,
      // The socket connects to what the guard's lookup returns: only addresses it has checked.
      connect: { timeout: options.connectTimeoutMs ?? 5_000, lookup: guard.lookup },
    });

  async function send(url: string, body: Buffer, headers: Record<string, string>, signal?: AbortSignal): Promise<DeliveryOutcome> {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    let target: URL;
    try {
      target = new URL(url);
      if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new Error('unsupported protocol');
    } catch (error) {
      return { kind: 'error', errorKind: 'invalid_url', message: (error as Error).message, durationMs: elapsed() };
    }
    try {
      // The resolver is not consulted for IP literals, so they are judged here (every spelling is
      // already normalised by the URL parser: 127.1, 2130706433 and 0x7f.1 all become 127.0.0.1).
      const literal = literalAddress(target);
      if (literal) guard.assertAddressAllowed(literal, target.hostname);
      const response = await request(target, {
        method: 'POST',
        dispatcher,
        body,
        signal,
        headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...headers },
      });
      const bodyExcerpt = await readCapped(response.body, RESPONSE_BODY_LIMIT);
      const retryAfterMs = response.statusCode === 200 ? undefined : parseRetryAfter(response.headers['retry-after'], Date.now());
      return {
        kind: 'response',
        status: response.statusCode,
        bodyExcerpt,
        durationMs: elapsed(),
        ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
      };
    } catch (error) {
      return { kind: 'error', errorKind: classify(error), message: (error as Error).message, durationMs: elapsed() };
    }
  }

  const post = (url: string, body: Buffer, hmacKey: string | null, signal?: AbortSignal): Promise<DeliveryOutcome> =>
    send(url, body, { 'x-tfc-task-signature': taskSignature(body, hmacKey) }, signal);

  return {
    guard,
    post,
    send,
    close: async () => {
      if (!options.dispatcher) await dispatcher.close();
    },
  };
}

/** What each delivery error means, in words a task's author can act on. */
export const DELIVERY_ERROR_DESCRIPTIONS: Readonly<Record<DeliveryErrorKind, string>> = {
  blocked:
    'the destination is not allowed (a private, loopback or reserved address); operators can allow it with TASK_DESTINATION_ALLOWLIST',
  dns: 'the host name could not be resolved',
  refused: 'the connection was refused',
  timeout: 'the endpoint did not answer in time',
  tls: 'the TLS handshake failed',
  reset: 'the connection was reset',
  invalid_url: 'the URL is not a valid http(s) URL',
  other: 'the request failed',
};

/** Errors that mean the request never reached the task server: its result ends `unreachable`, not `errored`. */
export const UNDELIVERABLE_ERROR_KINDS: ReadonlySet<DeliveryErrorKind> = new Set(['blocked', 'dns', 'refused', 'tls', 'invalid_url']);

/** A human sentence for what the endpoint answered, for 422 details and logs. */
export function describeOutcome(outcome: DeliveryOutcome): string {
  if (outcome.kind === 'response') return `the endpoint answered HTTP ${outcome.status}`;
  return DELIVERY_ERROR_DESCRIPTIONS[outcome.errorKind];
}
