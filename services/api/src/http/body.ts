import { ApiError } from '@runtasks/shared/errors';
import type { Middleware } from 'koa';
import type { z } from 'zod';
import { parseJsonBytes, readJsonBodyBytes } from './json-input.ts';

export const JSON_BODY_LIMIT = '1mb';

const ACCEPTED_TYPES = new Set(['application/vnd.api+json', 'application/json']);

function hasBody(headers: Record<string, string | string[] | undefined>): boolean {
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}

/**
 * 415 for any body that is not JSON:API or plain JSON (docs/api.md, "Request rules"). JSON:API 1.0 also requires 415
 * when its media type carries parameters.
 */
export const requireJsonContentType: Middleware = async (ctx, next) => {
  if (hasBody(ctx.request.headers)) {
    const header = ctx.request.headers['content-type'] ?? '';
    const [type = '', ...params] = header.split(';').map((part) => part.trim().toLowerCase());
    const jsonApiWithParams = type === 'application/vnd.api+json' && params.some((param) => !param.startsWith('charset='));
    if (!ACCEPTED_TYPES.has(type) || jsonApiWithParams) {
      throw new ApiError(
        415,
        'unsupported media type',
        `Content-Type must be application/vnd.api+json or application/json; got ${header ? `'${header}'` : 'none'}.`,
      );
    }
  }
  await next();
};

/**
 * The JSON body as `ctx.request.body` (`{}` where there is none), read and decoded by json-input.ts: at
 * most `limit`, UTF-8, an object or array, numbers kept as sent. `method`: the route's; a DELETE is
 * parsed only when given.
 */
export function jsonBodyParser(limit = JSON_BODY_LIMIT, method?: string): Middleware {
  const methods = new Set(method ? [method] : ['POST', 'PUT', 'PATCH']);
  return async (ctx, next) => {
    if (methods.has(ctx.method.toUpperCase()) && ctx.request.body === undefined) {
      const bytes = hasBody(ctx.request.headers) ? await readJsonBodyBytes(ctx.req, limit) : Buffer.alloc(0);
      ctx.request.body = bytes.length === 0 ? {} : parseJsonBytes(bytes, undefined, true).value;
    }
    await next();
  };
}

/** zod issue path → JSON:API pointer: the request schemas mirror the document, so paths line up. The whole document is ''. */
export function pointerOf(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '';
  return '/' + path.map((segment) => String(segment).replaceAll('~', '~0').replaceAll('/', '~1')).join('/');
}

const isMissing = (issue: z.core.$ZodIssue): boolean => issue.code === 'invalid_type' && issue.input === undefined;

/**
 * A union's own issue says only "Invalid input": the issue of the member the value was meant as says what
 * is wrong and where (an outcome's `url`, rather than the outcome). That member is the one that got
 * furthest: a value given wrong rather than one left out, then the longest path.
 */
function specificIssue(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== 'invalid_union') return issue;
  const nested = issue.errors.flat();
  if (nested.length === 0) return issue;
  const rank = (item: z.core.$ZodIssue): number => (isMissing(item) ? 0 : 1000) + item.path.length;
  const furthest = nested.reduce((best, item) => (rank(item) > rank(best) ? item : best));
  return specificIssue({ ...furthest, path: [...issue.path, ...furthest.path] });
}

export function parseWith<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  // reportInput: without it zod leaves `input` out of every issue, and every wrong type read as "missing".
  const parsed = schema.safeParse(value, { reportInput: true });
  if (parsed.success) return parsed.data;
  const first = parsed.error.issues[0];
  const issue = first && specificIssue(first);
  if (!issue) throw new ApiError(422, 'invalid request');
  const pointer = pointerOf(issue.path);
  const missing = isMissing(issue);
  throw new ApiError(422, missing ? 'missing attribute' : 'invalid attribute', `${pointer} ${issue.message}`.trim(), { pointer });
}
