import { pino, type Logger, type LoggerOptions } from 'pino';

/** Paths that may carry secrets anywhere we log: headers, task configuration, callback tokens. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  '*.authorization',
  '*.hmacKey',
  '*["hmac-key"]',
  '*.hmac_key',
  '*.accessToken',
  '*.access_token',
  '*.token',
  '*.adminToken',
  '*.secretKey',
];

const CENSOR = '[redacted]';
/** How deep an error's causes are looked through: a cycle or a very long chain stops here. */
const MAX_ERROR_DEPTH = 8;

/**
 * Drops the arguments of the command an error carries, wherever in the error (its causes, an
 * AggregateError's errors). ioredis attaches the failed command to its errors, and the command can be
 * `HELLO 3 AUTH <user> <password>` or `AUTH <password>`: a refused password would be logged at every
 * reconnect. Redaction paths cannot reach it, since a cause nests to any depth. The command's name stays.
 */
function scrubCommands(value: unknown, depth: number): unknown {
  if (depth > MAX_ERROR_DEPTH || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => scrubCommands(item, depth + 1));
  const scrubbed: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    scrubbed[key] =
      key === 'command' && item !== null && typeof item === 'object' && 'args' in item
        ? { ...item, args: CENSOR }
        : scrubCommands(item, depth + 1);
  }
  return scrubbed;
}

function serializeError(error: unknown): unknown {
  return scrubCommands(error instanceof Error ? pino.stdSerializers.err(error) : error, 0);
}

/** The options of every process's logger (tests that capture lines build theirs from these). */
export function loggerOptions(level: string, name: string): LoggerOptions {
  return { name, level, redact: { paths: REDACT_PATHS, censor: CENSOR }, serializers: { err: serializeError } };
}

export function createLogger(level: string, name: string): Logger {
  return pino(loggerOptions(level, name));
}

export type { Logger };
