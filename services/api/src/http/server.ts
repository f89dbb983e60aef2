import { createServer, type RequestListener, type Server } from 'node:http';

/** How long the API's HTTP server lets a connection take, in milliseconds. */
export interface ServerLimits {
  /** A whole request, body included (Node's requestTimeout). */
  requestMs: number;
  /** A request's headers (Node's headersTimeout): a client that trickles them is cut off (slowloris). */
  headersMs: number;
  /**
   * A socket with no traffic either way. Without it, a client that never reads its response holds the
   * socket and the response's buffers for ever (a configuration archive is up to 50 MiB).
   */
  idleSocketMs: number;
  /** How often Node checks the two timeouts above; its default (30 s) let a 15 s limit fire at 45 s. */
  checkIntervalMs: number;
}

export const SERVER_LIMITS: ServerLimits = { requestMs: 30_000, headersMs: 15_000, idleSocketMs: 60_000, checkIntervalMs: 1_000 };

/** The API's HTTP server, not yet listening, with its limits. */
export function createApiServer(handler: RequestListener, limits: ServerLimits = SERVER_LIMITS): Server {
  const server = createServer(
    { requestTimeout: limits.requestMs, headersTimeout: limits.headersMs, connectionsCheckingInterval: limits.checkIntervalMs },
    handler,
  );
  // Destroys the socket (Node's default once a timeout is set and no 'timeout' listener takes over).
  server.setTimeout(limits.idleSocketMs);
  return server;
}
