/** JSON:API document shapes as HCP Terraform emits them (kebab-case attributes, `links.self`). */
export const MEDIA_TYPE = 'application/vnd.api+json';
export const API_PREFIX = '/api/v2';

export interface ResourceIdentifier {
  id: string;
  type: string;
}

export interface Relationship {
  data: ResourceIdentifier | ResourceIdentifier[] | null;
  links?: Record<string, string>;
}

export interface Resource {
  id: string;
  type: string;
  attributes: Record<string, unknown>;
  relationships?: Record<string, Relationship>;
  links?: { self: string } & Record<string, string>;
}

export interface PaginationMeta {
  'current-page': number;
  'page-size': number;
  'prev-page': number | null;
  'next-page': number | null;
  'total-pages': number;
  'total-count': number;
}

/** HCP's pagination without totals (organization run lists): where counting every match would cost too much. */
export type NextPrevPagination = Pick<PaginationMeta, 'current-page' | 'page-size' | 'prev-page' | 'next-page'>;

export interface Document {
  data: Resource | Resource[] | null;
  included?: Resource[];
  links?: Record<string, string | null>;
  meta?: { pagination?: PaginationMeta | NextPrevPagination } & Record<string, unknown>;
}

export const toOne = (type: string, id: string | null | undefined): Relationship => ({
  data: id ? { id, type } : null,
});

export const toMany = (type: string, ids: readonly string[]): Relationship => ({
  data: ids.map((id) => ({ id, type })),
});

/** A moment: a `Date`, or a timestamptz as PostgreSQL prints it to the raw read paths (rows.ts). */
export type Instant = Date | string;

/** A view's creation and last update, from an entity or a raw row. */
export interface Timestamps {
  createdAt: Instant;
  updatedAt: Instant;
}

/** PostgreSQL's text of a timestamptz in UTC (DateStyle ISO): the date, the time, up to six decimals. */
const POSTGRES_UTC = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * The ISO text of PostgreSQL's, as `new Date(text).toISOString()` gives it (milliseconds truncated) for
 * any year from 100 on, without making a Date: a list's page has two timestamps per row. Any other text
 * (another zone, a year past 9999, BC) goes through Date.
 */
export function isoFromPostgres(text: string): string {
  const parts = POSTGRES_UTC.exec(text);
  if (!parts) return new Date(text).toISOString();
  const milliseconds = (parts[3] ?? '').slice(0, 3).padEnd(3, '0');
  return `${parts[1]}T${parts[2]}.${milliseconds}Z`;
}

/** `…Z` with milliseconds: go-tfe's iso8601 layout requires the literal Z. */
export const timestamp = (instant: Instant | null | undefined): string | null => {
  if (instant === null || instant === undefined) return null;
  return typeof instant === 'string' ? isoFromPostgres(instant) : instant.toISOString();
};

export const selfLink = (path: string): { self: string } => ({ self: `${API_PREFIX}${path}` });

/** Deduplicates included resources by type and id, keeping the first. */
export function uniqueResources(resources: readonly Resource[]): Resource[] {
  const seen = new Set<string>();
  return resources.filter((resource) => {
    const key = `${resource.type}/${resource.id}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

export function single(resource: Resource, included: readonly Resource[] = []): Document {
  const document: Document = { data: resource };
  if (included.length > 0) document.included = uniqueResources(included);
  return document;
}
