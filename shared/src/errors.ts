/**
 * The one error model. Every failure a client can cause is an ApiError; the API renders it as a
 * JSON:API error object in one place, and anything else becomes an opaque 500.
 */
export interface ErrorSource {
  pointer?: string;
  parameter?: string;
  /** The offending request header (JSON:API 1.1's `source.header`). */
  header?: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly title: string;
  readonly detail: string | undefined;
  readonly source: ErrorSource | undefined;
  readonly headers: Record<string, string>;
  /** JSON:API error `meta`: specifics for a human when `title` and `detail` must stay fixed strings. */
  readonly meta: Record<string, unknown> | undefined;

  constructor(
    status: number,
    title: string,
    detail?: string,
    source?: ErrorSource,
    headers: Record<string, string> = {},
    meta?: Record<string, unknown>,
  ) {
    super(detail ? `${title}: ${detail}` : title);
    this.name = 'ApiError';
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.source = source;
    this.headers = headers;
    this.meta = meta;
  }
}

/** Missing, malformed, unknown, expired and revoked tokens all get this one body: a caller learns nothing about which it was. */
export const unauthorized = (): ApiError => new ApiError(401, 'unauthorized');

/** Missing, other organization's and not-permitted resources all get this one body: nothing tells a caller what exists. */
export const notFound = (): ApiError => new ApiError(404, 'not found');

export const methodNotAllowed = (): ApiError => new ApiError(405, 'method not allowed', 'This endpoint does not accept that method.');

export const invalidAttribute = (pointer: string, detail: string): ApiError => new ApiError(422, 'invalid attribute', detail, { pointer });

export const invalidParameter = (parameter: string, detail: string, status = 422): ApiError =>
  new ApiError(status, 'invalid query parameter', detail, { parameter });

/**
 * An `include` we do not serve: HCP's exact title and detail, since clients match the text. go-tfe
 * renders an error as title + "\n\n" + detail; some releases map a 400 containing "Invalid include
 * parameter" (case-sensitive) to ErrInvalidIncludeValue, and the Terraform CLI checks that
 * err.Error() ends with it. So the specifics (the value, what is allowed) go in `meta`.
 */
export const invalidInclude = (meta: { reason: string; value: string | string[]; allowed: readonly string[] }): ApiError =>
  new ApiError(400, 'bad request', 'Invalid include parameter', { parameter: 'include' }, {}, { ...meta, allowed: [...meta.allowed] });

export const conflict = (detail: string, title = 'conflict'): ApiError => new ApiError(409, title, detail);

/**
 * The caller may see the resource but not do this to it: the detail names the permission it lacks. Only
 * where the caller can read the resource anyway; everything it cannot see stays a 404 (`notFound`).
 */
export const forbidden = (detail: string): ApiError => new ApiError(403, 'forbidden', detail);
