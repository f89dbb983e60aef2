import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import { DEFAULT_BODY_RATE, guardBodyRate, type BodyRate } from './body-rate.ts';

/** How long the API's HTTP server lets a connection take, in milliseconds. */
export interface ServerLimits {
  /** A whole request, body included (Node's requestTimeout; 0: none, the body rate rule below stands instead). */
  requestMs: number;
  /** How fast a request body must arrive (body-rate.ts): a slow upload is not cut at a fixed time, a stalled one is. */
  bodyRate?: BodyRate;
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

export const SERVER_LIMITS: ServerLimits = {
  requestMs: 0,
  bodyRate: DEFAULT_BODY_RATE,
  headersMs: 15_000,
  idleSocketMs: 60_000,
  checkIntervalMs: 1_000,
};

/** The soft limit on open files of this process (Linux's /proc/self/limits), or undefined where it cannot be read or has none. */
export function openFilesLimit(limits = readLimits()): number | undefined {
  const soft = /^Max open files\s+(\S+)/m.exec(limits ?? '')?.[1];
  const value = soft === undefined ? Number.NaN : Number(soft);
  return Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

function readLimits(): string | undefined {
  try {
    return readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * How many client connections the server takes at once: the process's open-files limit less what the
 * process needs besides (`reserved`: its database and Redis connections, its files). Past it, Node
 * closes a new connection at once. Without it, a flood of idle connections used up the descriptors and
 * the process stalled as a whole: no database connection, no Redis, no probe answered until they went.
 */
export function connectionCeiling(openFiles: number | undefined, reserved: number): number | undefined {
  if (openFiles === undefined) return undefined;
  return Math.max(1, openFiles - reserved);
}

/** The API's HTTP server, not yet listening, with its limits; `maxConnections` as connectionCeiling says. */
export function createApiServer(handler: RequestListener, limits: ServerLimits = SERVER_LIMITS, maxConnections?: number): Server {
  const rate = limits.bodyRate;
  const guarded: RequestListener = rate
    ? (req, res) => {
        guardBodyRate(req, res, rate);
        handler(req, res);
      }
    : handler;
  const server = createServer(
    { requestTimeout: limits.requestMs, headersTimeout: limits.headersMs, connectionsCheckingInterval: limits.checkIntervalMs },
    guarded,
  );
  // Destroys the socket (Node's default once a timeout is set and no 'timeout' listener takes over).
  server.setTimeout(limits.idleSocketMs);
  if (maxConnections !== undefined) server.maxConnections = maxConnections;
  return server;
}
