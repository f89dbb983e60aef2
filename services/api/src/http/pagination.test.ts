import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { ApiError } from '@runtasks/shared/errors';
import type { Resource } from './jsonapi.ts';
import { collection, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, paginationMeta, parsePage } from './pagination.ts';

type Query = Record<string, string | string[] | undefined>;

function parseError(query: Query): ApiError {
  try {
    parsePage(query);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error(`parsePage(${JSON.stringify(query)}) did not throw`);
}

describe('parsePage', () => {
  it('defaults are 20 per page and 100 at most', () => {
    expect(DEFAULT_PAGE_SIZE).toBe(20);
    expect(MAX_PAGE_SIZE).toBe(100);
  });

  it.each<[Query, { number: number; size: number; offset: number }]>([
    [{}, { number: 1, size: 20, offset: 0 }],
    [
      { 'page[number]': undefined, 'page[size]': undefined },
      { number: 1, size: 20, offset: 0 },
    ],
    [{ 'page[number]': '1' }, { number: 1, size: 20, offset: 0 }],
    [{ 'page[number]': '2' }, { number: 2, size: 20, offset: 20 }],
    [{ 'page[size]': '1' }, { number: 1, size: 1, offset: 0 }],
    [{ 'page[size]': '100' }, { number: 1, size: 100, offset: 0 }],
    [
      { 'page[number]': '3', 'page[size]': '7' },
      { number: 3, size: 7, offset: 14 },
    ],
    [
      { 'page[number]': '10', 'page[size]': '100' },
      { number: 10, size: 100, offset: 900 },
    ],
    [
      { 'page[number]': '007', 'page[size]': '05' },
      { number: 7, size: 5, offset: 30 },
    ],
    [{ 'page[number]': '1000000' }, { number: 1_000_000, size: 20, offset: 19_999_980 }],
    [
      { 'page[number]': String(Number.MAX_SAFE_INTEGER), 'page[size]': '1' },
      { number: Number.MAX_SAFE_INTEGER, size: 1, offset: Number.MAX_SAFE_INTEGER - 1 },
    ],
    [
      { 'page[number]': '2', other: 'ignored', include: 'workspace' },
      { number: 2, size: 20, offset: 20 },
    ],
  ])('%j → %j', (query, expected) => {
    expect(parsePage(query)).toEqual(expected);
  });

  it.each<[string, string | string[]]>([
    ['page[size]', '0'],
    ['page[size]', '101'],
    ['page[size]', '1000'],
    ['page[size]', '-1'],
    ['page[size]', '1.5'],
    ['page[size]', '1e2'],
    ['page[size]', 'abc'],
    ['page[size]', ''],
    ['page[size]', ' 5'],
    ['page[size]', '0x10'],
    ['page[size]', ['5', '6']],
    ['page[number]', '0'],
    ['page[number]', '-2'],
    ['page[number]', '2.0'],
    ['page[number]', 'last'],
    ['page[number]', ''],
    ['page[number]', String(Number.MAX_SAFE_INTEGER + 1)],
    ['page[number]', '99999999999999999999999'],
    ['page[number]', ['1', '2']],
  ])('%s=%j → 422 naming the parameter', (parameter, value) => {
    const error = parseError({ [parameter]: value });
    expect(error.status).toBe(422);
    expect(error.source).toEqual({ parameter });
    expect(error.detail).toContain(parameter);
  });
});

describe('paginationMeta', () => {
  it.each([
    {
      name: 'no items',
      page: { number: 1, size: 20, offset: 0 },
      total: 0,
      expected: { 'current-page': 1, 'page-size': 20, 'prev-page': null, 'next-page': null, 'total-pages': 1, 'total-count': 0 },
    },
    {
      name: 'one item',
      page: { number: 1, size: 20, offset: 0 },
      total: 1,
      expected: { 'current-page': 1, 'page-size': 20, 'prev-page': null, 'next-page': null, 'total-pages': 1, 'total-count': 1 },
    },
    {
      name: 'exactly one full page',
      page: { number: 1, size: 20, offset: 0 },
      total: 20,
      expected: { 'current-page': 1, 'page-size': 20, 'prev-page': null, 'next-page': null, 'total-pages': 1, 'total-count': 20 },
    },
    {
      name: 'one more than a page',
      page: { number: 1, size: 20, offset: 0 },
      total: 21,
      expected: { 'current-page': 1, 'page-size': 20, 'prev-page': null, 'next-page': 2, 'total-pages': 2, 'total-count': 21 },
    },
    {
      name: 'many pages, first',
      page: { number: 1, size: 10, offset: 0 },
      total: 95,
      expected: { 'current-page': 1, 'page-size': 10, 'prev-page': null, 'next-page': 2, 'total-pages': 10, 'total-count': 95 },
    },
    {
      name: 'many pages, middle',
      page: { number: 5, size: 10, offset: 40 },
      total: 95,
      expected: { 'current-page': 5, 'page-size': 10, 'prev-page': 4, 'next-page': 6, 'total-pages': 10, 'total-count': 95 },
    },
    {
      name: 'many pages, last (partial)',
      page: { number: 10, size: 10, offset: 90 },
      total: 95,
      expected: { 'current-page': 10, 'page-size': 10, 'prev-page': 9, 'next-page': null, 'total-pages': 10, 'total-count': 95 },
    },
    {
      name: 'many pages, last (full)',
      page: { number: 4, size: 25, offset: 75 },
      total: 100,
      expected: { 'current-page': 4, 'page-size': 25, 'prev-page': 3, 'next-page': null, 'total-pages': 4, 'total-count': 100 },
    },
    {
      name: 'page size 1',
      page: { number: 2, size: 1, offset: 1 },
      total: 3,
      expected: { 'current-page': 2, 'page-size': 1, 'prev-page': 1, 'next-page': 3, 'total-pages': 3, 'total-count': 3 },
    },
    {
      name: 'just past the last page: prev points at the last page, no next',
      page: { number: 11, size: 10, offset: 100 },
      total: 95,
      expected: { 'current-page': 11, 'page-size': 10, 'prev-page': 10, 'next-page': null, 'total-pages': 10, 'total-count': 95 },
    },
    {
      name: 'far past the last page',
      page: { number: 50, size: 10, offset: 490 },
      total: 95,
      expected: { 'current-page': 50, 'page-size': 10, 'prev-page': 10, 'next-page': null, 'total-pages': 10, 'total-count': 95 },
    },
    {
      name: 'past the only page of an empty collection',
      page: { number: 3, size: 20, offset: 40 },
      total: 0,
      expected: { 'current-page': 3, 'page-size': 20, 'prev-page': 1, 'next-page': null, 'total-pages': 1, 'total-count': 0 },
    },
  ])('$name', ({ page, total, expected }) => {
    expect(paginationMeta(page, total)).toEqual(expected);
  });
});

describe('collection', () => {
  const resource = (id: string): Resource => ({ id, type: 'runs', attributes: {} });

  it('links keep other parameters and point at first, prev, next and last', () => {
    const url = new URL('http://runtasks.test/api/v2/workspaces/ws-1/runs?include=workspace&page%5Bnumber%5D=2&page%5Bsize%5D=10');
    const document = collection([resource('run-1')], { number: 2, size: 10, offset: 10 }, 35, url);
    const pageOf = (link: string | null | undefined): string | null => (link ? new URL(link).searchParams.get('page[number]') : null);
    expect(document.meta?.pagination?.['total-pages']).toBe(4);
    expect(pageOf(document.links?.['self'])).toBe('2');
    expect(pageOf(document.links?.['first'])).toBe('1');
    expect(pageOf(document.links?.['prev'])).toBe('1');
    expect(pageOf(document.links?.['next'])).toBe('3');
    expect(pageOf(document.links?.['last'])).toBe('4');
    for (const link of Object.values(document.links ?? {})) {
      const parsed = new URL(link!);
      expect(parsed.searchParams.get('include')).toBe('workspace');
      expect(parsed.searchParams.get('page[size]')).toBe('10');
      expect(parsed.pathname).toBe('/api/v2/workspaces/ws-1/runs');
    }
  });

  it('an empty collection has null prev and next and no included', () => {
    const document = collection([], { number: 1, size: 20, offset: 0 }, 0, new URL('http://runtasks.test/api/v2/runs'));
    expect(document.data).toEqual([]);
    expect(document.links?.['prev']).toBeNull();
    expect(document.links?.['next']).toBeNull();
    expect(document).not.toHaveProperty('included');
  });

  it('included resources are deduplicated by type and id', () => {
    const ws = { id: 'ws-1', type: 'workspaces', attributes: { name: 'first' } };
    const document = collection([resource('run-1')], { number: 1, size: 20, offset: 0 }, 1, new URL('http://runtasks.test/x'), [
      ws,
      { ...ws, attributes: { name: 'second' } },
      { id: 'ws-1', type: 'organizations', attributes: {} },
    ]);
    expect(document.included).toEqual([ws, { id: 'ws-1', type: 'organizations', attributes: {} }]);
  });
});

describe('collection links', () => {
  /** What the links are defined as: the request's URL with both page parameters set, one URL per link. */
  function referenceLink(requestUrl: URL, number: number | null, size: number): string | null {
    if (number === null) return null;
    const url = new URL(requestUrl);
    url.searchParams.set('page[number]', String(number));
    url.searchParams.set('page[size]', String(size));
    return url.toString();
  }

  const QUERY_PARTS = [
    'page[number]=2',
    'page%5Bnumber%5D=7',
    'page[number]=',
    'page[size]=5',
    'page%5Bsize%5D=100',
    'include=run,workspace',
    'include=task_stages.task-results',
    'filter[name]=a b',
    'q=a+b',
    'x=%zz',
    'x=%E2%82%AC',
    'emoji=☃',
    '=',
    'flag',
    '',
    'page[number]=1&page[number]=3',
    'a=1&b=2&a=3',
  ];
  const BASES = [
    'http://runtasks.test/api/v2/runs',
    'https://runtasks.example:8443/prefix/api/v2/organizations/acme/tasks',
    'http://127.0.0.1:3000/api/v2/runs/run-1/task-stages',
  ];

  it('are the request URL with page[number] and page[size] set, for any query (property)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...BASES),
        fc.array(fc.oneof(fc.constantFrom(...QUERY_PARTS), fc.string({ maxLength: 6 })), { maxLength: 6 }),
        fc.constantFrom('', '#', '#frag?x=1'),
        fc.integer({ min: 1, max: 100 }),
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 5000 }),
        (base, parts, fragment, size, number, total) => {
          const requestUrl = new URL(`${base}${parts.length > 0 ? `?${parts.join('&')}` : ''}${fragment}`);
          const page = { number, size, offset: (number - 1) * size };
          const document = collection([], page, total, requestUrl);
          const meta = paginationMeta(page, total);
          expect(document.links).toEqual({
            self: referenceLink(requestUrl, meta['current-page'], size),
            first: referenceLink(requestUrl, 1, size),
            prev: referenceLink(requestUrl, meta['prev-page'], size),
            next: referenceLink(requestUrl, meta['next-page'], size),
            last: referenceLink(requestUrl, meta['total-pages'], size),
          });
        },
      ),
      { numRuns: 2000 },
    );
  });

  it.each([
    ['no query', 'http://runtasks.test/api/v2/runs', 'http://runtasks.test/api/v2/runs?page%5Bnumber%5D=2&page%5Bsize%5D=10'],
    ['an empty query', 'http://runtasks.test/api/v2/runs?', 'http://runtasks.test/api/v2/runs?page%5Bnumber%5D=2&page%5Bsize%5D=10'],
    [
      'page parameters in place, others kept in order',
      'http://runtasks.test/api/v2/runs?include=run&page%5Bsize%5D=3&page%5Bnumber%5D=9&z=1',
      'http://runtasks.test/api/v2/runs?include=run&page%5Bsize%5D=10&page%5Bnumber%5D=2&z=1',
    ],
    [
      'a repeated page number once, where it first stood',
      'http://runtasks.test/api/v2/runs?page[number]=1&a=b&page[number]=3',
      'http://runtasks.test/api/v2/runs?page%5Bnumber%5D=2&a=b&page%5Bsize%5D=10',
    ],
  ])('next link with %s', (_name, url, next) => {
    const document = collection([], { number: 1, size: 10, offset: 0 }, 25, new URL(url));
    expect(document.links?.['next']).toBe(next);
  });
});
