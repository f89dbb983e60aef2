import { pino, type Logger } from 'pino';

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

export function createLogger(level: string, name: string): Logger {
  return pino({ name, level, redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
}

export type { Logger };
