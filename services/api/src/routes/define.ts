import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { invalidAttribute, notFound } from '@runtasks/shared/errors';
import type { z } from 'zod';
import type { ApiContext } from '../context.ts';
import { MEDIA_TYPE, type Document } from '../http/jsonapi.ts';

export const HTTP_METHODS = ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/**
 * A route: method and path under /api/v2, whether it needs a bearer token, and a thin handler.
 * The route table is data so the isolation test can enumerate every route.
 */
export interface RouteDef {
  method: HttpMethod;
  path: string;
  /**
   * `token`: an API token. `callback`: the handler checks the task result's access token itself.
   * `token-or-task`: an API token, or a task result's access token (ctx.state.taskAccess).
   * `audit-trail`: an organization's audit trail token or an owner's token (ctx.state.auditTrailOrganizationId).
   */
  auth: 'public' | 'token' | 'callback' | 'token-or-task' | 'audit-trail';
  /** Body size limit when not the default 1 MiB (callbacks may carry outcomes up to 5 MiB). */
  bodyLimit?: string;
  /** `raw`: the handler reads the body itself (archive uploads); no JSON content-type rule or parsing. */
  body?: 'json' | 'raw';
  /** A raw body's media type and what it is, for the OpenAPI document (default: a .tar.gz as octet-stream). */
  rawBody?: { mediaType: string; description: string };
  /** More than the summary says, for the OpenAPI document (rules a client must know). */
  notes?: string;
  /** The schema the handler passes to `parseWith` for the body: the OpenAPI document is generated from it. */
  requestSchema?: z.ZodType;
  /** The handler also takes no body (or `{}`) although `requestSchema` requires one. */
  optionalBody?: boolean;
  /** One line for the OpenAPI document and the /docs page. */
  summary?: string;
  /** Query parameters the handler reads, for the OpenAPI document. */
  query?: RouteQuery;
  /** Optional request headers the handler reads, for the OpenAPI document. */
  headers?: readonly RouteHeader[];
  /** The success response, when not the default (201 JSON:API document for POST, 204 for DELETE, else 200 document). */
  response?: RouteResponse;
  handler: (ctx: ApiContext) => Promise<void>;
}

export interface RouteQuery {
  /** `page[number]` and `page[size]`: a paginated collection. */
  page?: boolean;
  /** The relationship paths the handler accepts in `include`. */
  include?: readonly string[];
  /** Other parameters the handler reads (filters, search). */
  params?: readonly string[];
}

export interface RouteHeader {
  name: string;
  description: string;
}

export interface RouteResponse {
  status: number;
  /** `jsonapi` (default): a JSON:API document; `json`: any JSON; `binary`: octet-stream; `none`: no body. */
  content?: 'jsonapi' | 'json' | 'binary' | 'none';
}

export function respond(ctx: ApiContext, status: number, document?: Document): void {
  // Without a document, an explicit null body: Koa would otherwise send the status message
  // ("Accepted") as a text/plain body with a 202. Set before the status, or Koa turns it into a 204.
  if (document === undefined) ctx.body = null;
  ctx.status = status;
  if (document !== undefined) {
    ctx.type = MEDIA_TYPE;
    ctx.body = document;
  }
}

/** The request's path and query on the public base, for absolute pagination links (never the client's host). */
export function publicRequestUrl(ctx: ApiContext): URL {
  const query = ctx.querystring ? `?${ctx.querystring}` : '';
  return new URL(ctx.deps.config.publicBaseUrl + ctx.path + query);
}

export function orNotFound<T>(value: T | null | undefined): T {
  if (value === null || value === undefined) throw notFound();
  return value;
}

/** Turns a unique-constraint violation into HCP's "has already been taken" on the offending attribute. */
export async function uniqueAs<T>(pointer: string, label: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof UniqueConstraintViolationException) throw invalidAttribute(pointer, `${label} has already been taken`);
    throw error;
  }
}
