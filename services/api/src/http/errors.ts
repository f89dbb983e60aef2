import { ApiError, methodNotAllowed } from '@runtasks/shared/errors';
import { isBackingServiceUnavailable } from '@runtasks/shared/db';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { Context, Middleware } from 'koa';
import { MEDIA_TYPE } from './jsonapi.ts';

interface ErrorObject {
  status: string;
  title: string;
  detail?: string;
  source?: { pointer?: string; parameter?: string; header?: string };
  meta?: Record<string, unknown>;
}

/** Maps anything thrown below to a JSON:API error; internal details never leave the process. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof UniqueConstraintViolationException)
    return new ApiError(409, 'conflict', 'The resource was changed concurrently; retry the request.');
  const status = (error as { status?: number }).status;
  if (status === 405 || status === 501) return methodNotAllowed();
  if (isBackingServiceUnavailable(error)) {
    return new ApiError(503, 'service unavailable', 'A backing service is unavailable; retry shortly.', undefined, { 'Retry-After': '5' });
  }
  return new ApiError(500, 'internal server error', 'An unexpected error occurred; quote the request id when reporting it.');
}

export function renderError(error: ApiError): { errors: ErrorObject[] } {
  const object: ErrorObject = { status: String(error.status), title: error.title };
  if (error.detail !== undefined) object.detail = error.detail;
  if (error.source !== undefined) object.source = error.source;
  if (error.meta !== undefined) object.meta = error.meta;
  return { errors: [object] };
}

/** Errors of a request stream whose client went away: Node's "aborted" (ECONNRESET), a cut-off body, a parser error at EOF. */
const ABORT_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE', 'HPE_INVALID_EOF_STATE']);

/**
 * The client closed its connection before its request was complete (Node had not received all of it),
 * and its connection is what failed: its doing, not a backing service's (ECONNRESET is also what a reset
 * database connection throws, hence both conditions). Answered with 499, as the body parser answers a request closed
 * before it reads it (nginx's "client closed request"; nobody reads it), and never logged as our error.
 */
export function abortedByClient(request: Context['req'], thrown: unknown): boolean {
  const code = (thrown as { code?: unknown } | null)?.code;
  return !request.complete && typeof code === 'string' && ABORT_CODES.has(code);
}

const clientClosedRequest = (): ApiError =>
  new ApiError(499, 'client closed request', 'The client closed the connection before the request was complete.');

export const errorHandler: Middleware = async (ctx, next) => {
  try {
    await next();
  } catch (thrown) {
    const error = abortedByClient(ctx.req, thrown) ? clientClosedRequest() : toApiError(thrown);
    // A 503 is a correct answer while a backing service is away: the app logs the outage once, not
    // each request as an error.
    if (error.status === 503) ctx.app.emit('unavailable', thrown, ctx);
    else if (error.status >= 500) ctx.app.emit('error', thrown, ctx);
    ctx.status = error.status;
    ctx.type = MEDIA_TYPE;
    for (const [name, value] of Object.entries(error.headers)) ctx.set(name, value);
    ctx.body = renderError(error);
  }
};
