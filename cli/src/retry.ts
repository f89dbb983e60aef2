/**
 * How long to wait before the next try, and what a failed fetch means: pure, so a table pins them.
 */

/** The backoff's bounds: the first retry soon, none farther apart than a CI log can stay silent comfortably. */
export const FIRST_BACKOFF_MS = 500;
export const MAX_BACKOFF_MS = 15_000;

/** The wait before retry `attempt` (0-based): doubling from FIRST_BACKOFF_MS, capped, with up to a fifth taken off at random so that many runners do not come back in step. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** Math.min(attempt, 20));
  return Math.round(base * (1 - 0.2 * random()));
}

/** Retry-After in seconds or as an HTTP date, in ms from `now`; undefined where absent or unreadable. */
export function retryAfterMs(header: string | null, now: number): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * A fetch that failed without an answer: `transient` when a restarting service causes it (reset, closed,
 * timed out), `unreachable` when it may also be a wrong address (refused, unknown host), `fatal` when
 * waiting cannot help (a TLS mismatch, a certificate the runner does not trust).
 */
export interface NetworkFailure {
  kind: 'transient' | 'unreachable' | 'fatal';
  /** A few words for the "lost the service" line. */
  reason: string;
  /** The one-line error where it is not retried. */
  message: string;
}

const TLS_MISMATCH = /wrong version number|packet length too long|http request|ERR_SSL_|EPROTO/i;
const CERTIFICATE = /CERT|certificate|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS_CERT/i;

export function describeNetworkError(error: unknown, address: string, timeoutMs: number): NetworkFailure {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const code = cause?.code ?? '';
  const text = `${code} ${cause?.message ?? ''}`;
  const unreachable = (reason: string): NetworkFailure => ({
    kind: 'unreachable',
    reason,
    message: `cannot reach the service at ${address}: ${reason}`,
  });
  if ((error as Error).name === 'TimeoutError') {
    return {
      kind: 'transient',
      reason: `no answer within ${timeoutMs / 1000} s`,
      message: `cannot reach the service at ${address}: no answer within ${timeoutMs / 1000} s`,
    };
  }
  // A URL the service handed out that is not a URL at all: no retry can mend it (its text is never shown).
  if (code === 'ERR_INVALID_URL')
    return { kind: 'fatal', reason: 'not a URL', message: `cannot reach the service at ${address}: not a URL` };
  // fetch refuses ports browsers block (1, 25, 6000, …) before connecting: no retry gets past that.
  if (cause?.message === 'bad port')
    return { kind: 'fatal', reason: 'bad port', message: `cannot reach the service at ${address}: a port fetch refuses` };
  if (code === 'ECONNREFUSED') return unreachable('connection refused');
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return unreachable('unknown host');
  if (address.startsWith('https:') && TLS_MISMATCH.test(text)) {
    const plain = address.replace(/^https:/, 'http:');
    return {
      kind: 'fatal',
      reason: 'TLS mismatch',
      message: `${address} does not speak TLS (HTTPS) at that port, it looks like plain HTTP: use ${plain}, or the port where the service's TLS listens`,
    };
  }
  if (CERTIFICATE.test(text)) {
    return {
      kind: 'fatal',
      reason: 'certificate',
      message: `the service at ${address} has a certificate this runner does not trust (${code || cause?.message}): add its CA with NODE_EXTRA_CA_CERTS=FILE`,
    };
  }
  const reason =
    code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' ? 'connection closed' : cause?.message || (error as Error).message || String(error);
  return { kind: 'transient', reason, message: `cannot reach the service at ${address}: ${reason}` };
}
