import { redisTarget, type RedisSettings } from '../queue/connections.ts';
import { redactUrl } from './bootstrap.ts';

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ECONNRESET',
  '28P01',
  '28000',
  '3D000',
  // The database system is starting up: start-up waits for it.
  '57P03',
]);

function codeOf(error: unknown): string | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && CONNECTION_CODES.has(code)) return code;
    const errors = (current as { errors?: unknown[] }).errors;
    if (Array.isArray(errors) && errors.length > 0) current = errors[0];
    else current = (current as { cause?: unknown }).cause;
  }
  const named = error instanceof Error ? /\b(E[A-Z]{4,})\b/.exec(error.message)?.[1] : undefined;
  if (named && CONNECTION_CODES.has(named)) return named;
  if (error instanceof Error && /timeout|connect|closed/i.test(error.message)) return error.message;
  return undefined;
}

/** One line that names the variable and says what to do, instead of a stack trace. */
export function postgresUnreachableMessage(error: unknown, databaseUrl: string): string | undefined {
  const code = codeOf(error);
  if (!code) return undefined;
  return `Cannot reach PostgreSQL at DATABASE_URL=${redactUrl(databaseUrl)} (${code}). Start PostgreSQL (e.g. pg_ctlcluster --skip-systemctl-redirect 15 main start) or set DATABASE_URL to a running server, then run npm start again.`;
}

export function redisUnreachableMessage(error: unknown, settings: RedisSettings): string {
  const code = codeOf(error) ?? (error instanceof Error ? error.message : 'unreachable');
  const { variable, value } = redisTarget(settings);
  return `Cannot reach Redis at ${variable}=${value} (${code}). Start Redis (e.g. redis-server --daemonize yes --bind 127.0.0.1 --port 6379) or set ${variable} to a running server, then run npm start again.`;
}
