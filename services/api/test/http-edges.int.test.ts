import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { type Harness } from '../../../test/support/harness.ts';
import { api } from '../../../test/support/fixtures.ts';
import { type Response } from '../../../test/support/assertions.ts';
import { PUBLIC_BASE_URL, ORG, WORKSPACES, wsName, expectErrorDocument, expectLink, startEdges } from './http-edges.fixtures.ts';

/**
 * HTTP edges: pagination parameters, meta and links. Request bodies are in http-edges-bodies, unknown
 * routes and methods and `include` in http-edges-routes.
 */

describe('HTTP edges', () => {
  let h: Harness;
  let token: string;
  let workspaceId: string;
  let runIds: string[];

  const listPath = `/organizations/${ORG}/workspaces`;
  const list = (query: string) => api(h, 'get', `${listPath}${query}`, token);
  const names = (res: Response): string[] =>
    (res.body.data as { attributes: { name: string } }[]).map((resource) => resource.attributes.name);

  beforeAll(async () => {
    ({ h, token, workspaceId, runIds } = await startEdges());
  });

  afterAll(async () => {
    await h?.close();
  });

  describe('pagination', () => {
    it('defaults to page 1 of size 20, with meta and absolute links on PUBLIC_BASE_URL', async () => {
      expect(h.config.publicBaseUrl).toBe(PUBLIC_BASE_URL);
      const res = await list('');
      expect(res.status).toBe(200);
      expect(names(res)).toEqual(Array.from({ length: 20 }, (_, index) => wsName(index)));
      expect(res.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 20,
        'prev-page': null,
        'next-page': 2,
        'total-pages': 3,
        'total-count': 45,
      });
      expect(Object.keys(res.body.links).sort()).toEqual(['first', 'last', 'next', 'prev', 'self']);
      expectLink(res.body.links.self, listPath, 1, 20);
      expectLink(res.body.links.first, listPath, 1, 20);
      expect(res.body.links.prev).toBeNull();
      expectLink(res.body.links.next, listPath, 2, 20);
      expectLink(res.body.links.last, listPath, 3, 20);
    });

    it.each([
      ['1', 1, 45],
      ['20', 20, 3],
      ['100', 45, 1],
    ])('page[size]=%s is accepted', async (size, count, totalPages) => {
      const res = await list(`?page[size]=${size}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(count);
      expect(res.body.meta.pagination).toMatchObject({
        'page-size': Number(size),
        'total-pages': totalPages,
        'total-count': 45,
        'current-page': 1,
      });
      expect(res.body.meta.pagination['next-page']).toBe(totalPages > 1 ? 2 : null);
      expect(res.body.links.next === null).toBe(totalPages === 1);
      expect(new URL(res.body.links.last).searchParams.get('page[number]')).toBe(String(totalPages));
    });

    it.each([
      ['page[size]=0', 'page[size]'],
      ['page[size]=101', 'page[size]'],
      ['page[size]=-1', 'page[size]'],
      ['page[size]=abc', 'page[size]'],
      ['page[size]=', 'page[size]'],
      ['page[size]=1.5', 'page[size]'],
      ['page[size]=1e1', 'page[size]'],
      ['page[size]=1&page[size]=2', 'page[size]'],
      ['page[size]=5&page%5Bsize%5D=5', 'page[size]'],
      ['page[number]=0', 'page[number]'],
      ['page[number]=-1', 'page[number]'],
      ['page[number]=abc', 'page[number]'],
      ['page[number]=99999999999999999999', 'page[number]'],
      ['page[number]=1&page[number]=2', 'page[number]'],
    ])('%s → 422 naming the parameter', async (query, parameter) => {
      const error = expectErrorDocument(await list(`?${query}`), 422);
      expect(error.source).toEqual({ parameter });
    });

    it('rejects invalid parameters on GET /organizations too', async () => {
      expect(expectErrorDocument(await api(h, 'get', '/organizations?page[size]=0', h.adminToken), 422).source).toEqual({
        parameter: 'page[size]',
      });
      expect(expectErrorDocument(await api(h, 'get', '/organizations?page[number]=-1', h.adminToken), 422).source).toEqual({
        parameter: 'page[number]',
      });
    });

    it('walks the pages in order without gaps or repeats', async () => {
      const seen: string[] = [];
      for (let number = 1; number <= 3; number += 1) {
        const res = await list(`?page[size]=20&page[number]=${number}`);
        expect(res.body.meta.pagination).toMatchObject({
          'current-page': number,
          'prev-page': number > 1 ? number - 1 : null,
          'next-page': number < 3 ? number + 1 : null,
        });
        seen.push(...names(res));
      }
      expect(seen).toEqual(Array.from({ length: WORKSPACES }, (_, index) => wsName(index)));
    });

    it('the last page is partial', async () => {
      const res = await list('?page[size]=20&page[number]=3');
      expect(names(res)).toEqual([40, 41, 42, 43, 44].map(wsName));
      expect(res.body.links.next).toBeNull();
      expectLink(res.body.links.prev, listPath, 2, 20);
      expectLink(res.body.links.last, listPath, 3, 20);
    });

    it('past the last page → 200, empty data, correct meta and links', async () => {
      const res = await list('?page[size]=20&page[number]=7');
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([]);
      expect(res.body.meta.pagination).toEqual({
        'current-page': 7,
        'page-size': 20,
        'prev-page': 3,
        'next-page': null,
        'total-pages': 3,
        'total-count': 45,
      });
      expectLink(res.body.links.self, listPath, 7, 20);
      expectLink(res.body.links.first, listPath, 1, 20);
      expectLink(res.body.links.prev, listPath, 3, 20);
      expect(res.body.links.next).toBeNull();
      expectLink(res.body.links.last, listPath, 3, 20);
    });

    it('an empty collection has one empty page', async () => {
      const res = await api(h, 'get', `/organizations/${ORG}-two/workspaces`, h.adminToken);
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([]);
      expect(res.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 20,
        'prev-page': null,
        'next-page': null,
        'total-pages': 1,
        'total-count': 0,
      });
    });

    it('percent-encoded brackets work, and links carry each page parameter once', async () => {
      const res = await list('?page%5Bsize%5D=5&page%5Bnumber%5D=2');
      expect(res.status).toBe(200);
      expect(names(res)).toEqual([5, 6, 7, 8, 9].map(wsName));
      expect(res.body.meta.pagination).toMatchObject({
        'current-page': 2,
        'page-size': 5,
        'prev-page': 1,
        'next-page': 3,
        'total-pages': 9,
      });
      expectLink(res.body.links.self, listPath, 2, 5);
      expectLink(res.body.links.first, listPath, 1, 5);
      expectLink(res.body.links.prev, listPath, 1, 5);
      expectLink(res.body.links.next, listPath, 3, 5);
      expectLink(res.body.links.last, listPath, 9, 5);
    });

    it('links keep the other query parameters', async () => {
      const res = await list('?trace=abc%20def&page[size]=10&page[number]=2');
      expect(res.status).toBe(200);
      const extra = { trace: 'abc def' };
      expectLink(res.body.links.self, listPath, 2, 10, extra);
      expectLink(res.body.links.first, listPath, 1, 10, extra);
      expectLink(res.body.links.prev, listPath, 1, 10, extra);
      expectLink(res.body.links.next, listPath, 3, 10, extra);
      expectLink(res.body.links.last, listPath, 5, 10, extra);
      const runs = await api(h, 'get', `/workspaces/${workspaceId}/runs?include=task-stages&page[size]=1`, token);
      expect(runs.status).toBe(200);
      expect(runs.body.data).toHaveLength(1);
      expect(runs.body.meta.pagination).toMatchObject({ 'total-count': 2, 'total-pages': 2, 'next-page': 2 });
      expectLink(runs.body.links.next, `/workspaces/${workspaceId}/runs`, 2, 1, { include: 'task-stages' });
      const next = new URL(runs.body.links.next);
      // Following the link on the real server gives the other run.
      const second = await api(h, 'get', `${next.pathname.replace('/api/v2', '')}${next.search}`, token);
      expect(second.status).toBe(200);
      expect([runs.body.data[0].id, second.body.data[0].id].sort()).toEqual([...runIds].sort());
    });

    it('GET /organizations pages too, and shows each caller only its scope', async () => {
      const admin = await api(h, 'get', '/organizations?page[size]=2', h.adminToken);
      expect(admin.status).toBe(200);
      expect(admin.body.data).toHaveLength(2);
      expect(admin.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 2,
        'prev-page': null,
        'next-page': 2,
        'total-pages': 2,
        'total-count': 3,
      });
      expectLink(admin.body.links.next, '/organizations', 2, 2);
      const second = await api(h, 'get', '/organizations?page[size]=2&page[number]=2', h.adminToken);
      expect(second.body.data).toHaveLength(1);
      const all = [...admin.body.data, ...second.body.data].map((organization: { id: string }) => organization.id).sort();
      expect(all).toEqual([ORG, `${ORG}-three`, `${ORG}-two`]);
      const owner = await api(h, 'get', '/organizations', token);
      expect(owner.body.data.map((organization: { id: string }) => organization.id)).toEqual([ORG]);
      expect(owner.body.meta.pagination['total-count']).toBe(1);
    });
  });
});
