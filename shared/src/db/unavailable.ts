/**
 * SQLSTATEs that mean "the database cannot serve this now", not "the request is bad": connection
 * exceptions (08), insufficient resources (53), shutdowns (57P0x), and a statement cancelled by its
 * timeout (57014) or refused a lock (55P03), which retrying later may get past.
 */
const UNAVAILABLE_CODES = /^(08|53|57P0|57014$|55P03$)/;
/** Socket errors of a connection to a backing service (a server stopped mid-query resets it). */
const NETWORK_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ETIMEDOUT', 'ECONNRESET', 'EPIPE']);
/**
 * node-postgres reports a connection that died under a query by message only: "Connection terminated…",
 * and for the next query of the same transaction "Client has encountered a connection error and is not
 * queryable" (PostgreSQL terminated the session, e.g. pg_terminate_backend or a failover). ioredis says
 * "Connection is closed" for a command on a connection that went away.
 */
const UNAVAILABLE_MESSAGES =
  /timeout exceeded when trying to connect|Connection terminated|is not queryable|Client was closed|connection to PostgreSQL ended|Connection is closed/i;

function unavailableItself(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (UNAVAILABLE_CODES.test(code) || NETWORK_CODES.has(code))) return true;
  return error instanceof Error && UNAVAILABLE_MESSAGES.test(error.message);
}

/**
 * Whether an error says a backing service (PostgreSQL, Redis) cannot serve now, rather than that the
 * work is wrong: the API answers 503 for it and a job retries it for longer. The ORM wraps the driver's
 * error, so its causes are looked at too.
 */
export function isBackingServiceUnavailable(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current; depth += 1) {
    if (unavailableItself(current)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
