import { invalidParameter } from '@runtasks/shared/errors';
import type { Document, NextPrevPagination, PaginationMeta, Resource } from './jsonapi.ts';
import { uniqueResources } from './jsonapi.ts';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface Page {
  number: number;
  size: number;
  offset: number;
}

type Query = Record<string, string | string[] | undefined>;

/** A page parameter: a whole number from 1 to `max`, `fallback` when absent; anything else is a 422 naming it. */
export function pageParameter(query: Query, name: string, fallback: number, max: number): number {
  const raw = query[name];
  if (raw === undefined) return fallback;
  if (Array.isArray(raw)) throw invalidParameter(name, `${name} must be given at most once.`);
  if (!/^\d+$/.test(raw)) throw invalidParameter(name, `${name} must be a whole number from 1 to ${max}.`);
  const value = Number(raw);
  if (value < 1 || value > max) throw invalidParameter(name, `${name} must be a whole number from 1 to ${max}.`);
  return value;
}

export function parsePage(query: Query): Page {
  const size = pageParameter(query, 'page[size]', DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  const number = pageParameter(query, 'page[number]', 1, Number.MAX_SAFE_INTEGER);
  return { number, size, offset: (number - 1) * size };
}

export function paginationMeta(page: Page, totalCount: number): PaginationMeta {
  const totalPages = Math.max(1, Math.ceil(totalCount / page.size));
  return {
    'current-page': page.number,
    'page-size': page.size,
    'prev-page': page.number > 1 ? Math.min(page.number - 1, totalPages) : null,
    'next-page': page.number < totalPages ? page.number + 1 : null,
    'total-pages': totalPages,
    'total-count': totalCount,
  };
}

/**
 * Absolute links that keep the request's other parameters (include, filter) intact: the request's URL
 * with `page[number]` and `page[size]` set as URLSearchParams#set sets them (in place, else appended).
 * Five links differ only in the page number, so the query around it is serialized once, not per link.
 */
function pageLinks(requestUrl: URL, meta: PaginationMeta): Record<string, string | null> {
  const params = new URLSearchParams(requestUrl.search);
  params.set('page[number]', '1');
  params.set('page[size]', String(meta['page-size']));
  const entries = [...params];
  const numberAt = entries.findIndex(([name]) => name === 'page[number]');
  const before = new URLSearchParams(entries.slice(0, numberAt)).toString();
  const after = new URLSearchParams(entries.slice(numberAt + 1)).toString();
  // Neither `?` nor `#` can stand unescaped in the origin or the path: the first of them ends both.
  const href = requestUrl.href;
  const pathEnd = href.search(/[?#]/);
  const base = pathEnd === -1 ? href : href.slice(0, pathEnd);
  const hashAt = href.indexOf('#');
  const fragment = hashAt === -1 ? '' : href.slice(hashAt);
  const at = (number: number | null): string | null => {
    if (number === null) return null;
    const query = [before, `page%5Bnumber%5D=${number}`, after].filter((part) => part !== '').join('&');
    return `${base}?${query}${fragment}`;
  };
  return {
    self: at(meta['current-page']),
    first: at(1),
    prev: at(meta['prev-page']),
    next: at(meta['next-page']),
    last: at(meta['total-pages']),
  };
}

export function collection(
  resources: readonly Resource[],
  page: Page,
  totalCount: number,
  requestUrl: URL,
  included: readonly Resource[] = [],
): Document & { meta: { pagination: PaginationMeta } } {
  const meta = paginationMeta(page, totalCount);
  const document: Document & { meta: { pagination: PaginationMeta } } = {
    data: [...resources],
    links: pageLinks(requestUrl, meta),
    meta: { pagination: meta },
  };
  if (included.length > 0) document.included = uniqueResources(included);
  return document;
}

/**
 * A page of a list that is not counted (HCP's organization runs): `hasNext` says whether a row lay
 * past the page (the caller reads one more than the page size). Links are `self`, `prev` and `next`.
 */
export function uncountedCollection(
  resources: readonly Resource[],
  page: Page,
  hasNext: boolean,
  requestUrl: URL,
  included: readonly Resource[] = [],
): Document {
  const pagination: NextPrevPagination = {
    'current-page': page.number,
    'page-size': page.size,
    'prev-page': page.number > 1 ? page.number - 1 : null,
    'next-page': hasNext ? page.number + 1 : null,
  };
  const links = pageLinks(requestUrl, { ...pagination, 'total-pages': page.number, 'total-count': 0 });
  const document: Document = {
    data: [...resources],
    links: { self: links['self'] ?? null, prev: links['prev'] ?? null, next: links['next'] ?? null },
    meta: { pagination },
  };
  if (included.length > 0) document.included = uniqueResources(included);
  return document;
}
