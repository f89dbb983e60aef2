import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { request as httpRequest } from 'node:http';
import { gzipSync } from 'node:zlib';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { api, createOrganization, createOrganizationToken, createRun, createWorkspace, JSON_API } from '../../../test/support/fixtures.ts';
import { expectError, type ApiError, type Response } from '../../../test/support/assertions.ts';

/**
 * HTTP edges: pagination parameters, meta and links; request bodies (media types, size, malformed
 * and hostile JSON); error documents for unknown routes and methods; `include`.
 */

const PUBLIC_BASE_URL = 'http://runtasks.test';
const ORG = 'edges';
const WORKSPACES = 45;
const wsName = (index: number): string => `edge-ws-${String(index).padStart(2, '0')}`;
const MiB = 1024 * 1024;

/**
 * Every error: a JSON:API document with the status as a string, a request id, and nothing internal.
 * On top of expectError: the body in the message of a wrong status, the exact media type, the request
 * id, no internals in the text, and no top-level member but `errors`.
 */
function expectErrorDocument(res: Response, status: number): ApiError {
  expect({ status: res.status, text: res.text }).toEqual({ status, text: expect.any(String) });
  expect(res.headers['content-type']).toMatch(/^application\/vnd\.api\+json(;|$)/);
  expect(res.headers['x-request-id']).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
  expect(res.text).not.toMatch(/\bat .+:\d+:\d+|\n\s+at |\/work\/|node_modules|\.ts\b|\.js\b|Error:/);
  expect(Object.keys(JSON.parse(res.text) as object)).toEqual(['errors']);
  return expectError(res, status);
}

/** A pagination link: absolute on PUBLIC_BASE_URL, on `path`, for page `number` of `size`, with `extra` kept. */
function expectLink(link: unknown, path: string, number: number, size: number, extra: Record<string, string> = {}): void {
  expect(typeof link).toBe('string');
  const url = new URL(link as string);
  expect(`${url.origin}${url.pathname}`).toBe(`${PUBLIC_BASE_URL}/api/v2${path}`);
  const params = [...url.searchParams.entries()].sort(([a], [b]) => a.localeCompare(b));
  const expected = Object.entries({ ...extra, 'page[number]': String(number), 'page[size]': String(size) }).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  expect(params).toEqual(expected);
}

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A request with full control over framing (chunked bodies, no Content-Type). */
function raw(h: Harness, method: string, path: string, headers: Record<string, string>, chunks: Buffer[]): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, h.baseUrl);
    const req = httpRequest(url, { method, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    // The server may answer (413) before the whole body is written; that is the point, not an error.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

describe('HTTP edges', () => {
  let h: Harness;
  let token: string;
  let workspaceId: string;
  let runIds: string[];

  const listPath = `/organizations/${ORG}/workspaces`;
  const list = (query: string) => api(h, 'get', `${listPath}${query}`, token);
  const names = (res: Response): string[] =>
    (res.body.data as { attributes: { name: string } }[]).map((resource) => resource.attributes.name);
  const workspaceBody = (name: string, attributes: Record<string, unknown> = {}) => ({
    data: { type: 'workspaces', attributes: { name, ...attributes } },
  });
  const postWorkspace = (contentType: string | undefined, body: string | Buffer) => {
    let req = h.http.post(`/api/v2${listPath}`).set('Authorization', `Bearer ${token}`);
    if (contentType !== undefined) req = req.set('Content-Type', contentType);
    return req.send(body);
  };
  const postJson = (body: unknown) => postWorkspace(JSON_API, typeof body === 'string' ? body : JSON.stringify(body));

  beforeAll(async () => {
    h = await startHarness();
    await createOrganization(h, ORG);
    token = await createOrganizationToken(h, ORG);
    for (let index = 0; index < WORKSPACES; index += 1) {
      const id = await createWorkspace(h, ORG, token, wsName(index));
      if (index === 0) workspaceId = id;
    }
    await createOrganization(h, `${ORG}-two`);
    await createOrganization(h, `${ORG}-three`);
    runIds = [await createRun(h, token, workspaceId, { message: 'first' }), await createRun(h, token, workspaceId, { message: 'second' })];
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

  describe('request bodies on GET', () => {
    it.each([
      ['text/plain', 'not json'],
      ['application/vnd.api+json', '{not json'],
    ])('a GET with a %s body is answered as without one: the body is never read', async (contentType, body) => {
      const res = await raw(
        h,
        'GET',
        `/api/v2${listPath}?page[size]=1`,
        { Authorization: `Bearer ${token}`, 'Content-Type': contentType, 'Content-Length': String(Buffer.byteLength(body)) },
        [Buffer.from(body)],
      );
      expect(res.status).toBe(200);
      expect((JSON.parse(res.text) as { meta: { pagination: { 'total-count': number } } }).meta.pagination['total-count']).toBe(WORKSPACES);
    });
  });

  describe('request bodies on POST /organizations/:organization_name/workspaces', () => {
    it('a body without Content-Type → 415', async () => {
      const error = expectErrorDocument(await postWorkspace(undefined, Buffer.from(JSON.stringify(workspaceBody('no-type')))), 415);
      expect(error.detail).toContain('none');
    });

    it.each([
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/vnd.api+json; ext=foo',
      'application/vnd.api+json; profile="x"',
      'application/jsonx',
    ])('Content-Type %s → 415', async (contentType) => {
      expectErrorDocument(await postWorkspace(contentType, JSON.stringify(workspaceBody('bad-type'))), 415);
    });

    it.each([
      ['application/json', 'plain-json'],
      ['application/vnd.api+json', 'json-api'],
      ['application/vnd.api+json; charset=utf-8', 'json-api-charset'],
      ['Application/JSON', 'upper-json'],
    ])('Content-Type %s → 201 and the body is read', async (contentType, name) => {
      const res = await postWorkspace(contentType, JSON.stringify(workspaceBody(name, { description: `via ${contentType}` })));
      expect(res.status).toBe(201);
      expect(res.body.data.attributes).toMatchObject({ name, description: `via ${contentType}` });
    });

    it('a body over 1 MiB → 413, at exactly 1 MiB it is parsed', async () => {
      const sized = (bytes: number) => {
        const shell = JSON.stringify(workspaceBody('sized', { description: '' }));
        return shell.replace('"description":""', `"description":"${'x'.repeat(bytes - shell.length)}"`);
      };
      expect(Buffer.byteLength(sized(MiB))).toBe(MiB);
      const error = expectErrorDocument(await postJson(sized(MiB + 1)), 413);
      expect(error.title).toBe('payload too large');
      // Parsed, then refused by validation: the description is far too long.
      expect(expectErrorDocument(await postJson(sized(MiB)), 422).source).toEqual({ pointer: '/data/attributes/description' });
    });

    it('a chunked body over 1 MiB (no Content-Length) → 413', async () => {
      const chunk = Buffer.alloc(64 * 1024, 'x');
      const chunks = [
        Buffer.from('{"data":{"type":"workspaces","attributes":{"name":"chunked","description":"'),
        ...Array.from({ length: 17 }, () => chunk),
        Buffer.from('"}}}'),
      ];
      const res = await raw(
        h,
        'POST',
        `/api/v2${listPath}`,
        { Authorization: `Bearer ${token}`, 'Content-Type': JSON_API, 'Transfer-Encoding': 'chunked' },
        chunks,
      );
      expect(res.status).toBe(413);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(JSON.parse(res.text).errors[0].status).toBe('413');
    });

    it('a gzip body that inflates past 1 MiB → 413', async () => {
      const bomb = gzipSync(Buffer.from(JSON.stringify(workspaceBody('bomb', { description: 'x'.repeat(8 * MiB) }))));
      expect(bomb.length).toBeLessThan(64 * 1024);
      const res = await raw(
        h,
        'POST',
        `/api/v2${listPath}`,
        { Authorization: `Bearer ${token}`, 'Content-Type': JSON_API, 'Content-Encoding': 'gzip', 'Content-Length': String(bomb.length) },
        [bomb],
      );
      expect(res.status).toBe(413);
      expect(JSON.parse(res.text).errors[0].status).toBe('413');
    });

    it.each(['{"data": ', '{"data": {"type": "workspaces",}}', '{data: 1}', '{"data": {}} trailing', '\u00ff\u00fe'])(
      'malformed JSON %j → 400',
      async (body) => {
        const error = expectErrorDocument(await postJson(body), 400);
        expect(error.title).toBe('malformed JSON');
      },
    );

    it.each(['"hello"', '42', 'null', 'true'])(
      'a JSON scalar body %s → 400 (only objects and arrays are JSON documents here)',
      async (body) => {
        expect(expectErrorDocument(await postJson(body), 400).title).toBe('malformed JSON');
      },
    );

    it('a JSON array body → 422 pointing at the whole document', async () => {
      const error = expectErrorDocument(await postJson('[]'), 422);
      expect(error.source).toEqual({ pointer: '' });
    });

    it('wrong data.type → 422 at /data/type', async () => {
      const error = expectErrorDocument(await postJson({ data: { type: 'organizations', attributes: { name: 'wrong-type' } } }), 422);
      expect(error.source).toEqual({ pointer: '/data/type' });
      expect(error.status).toBe('422');
    });

    it('missing data → 422 at /data', async () => {
      const error = expectErrorDocument(await postJson({ type: 'workspaces', attributes: { name: 'no-data' } }), 422);
      expect(error.source).toEqual({ pointer: '/data' });
      expect(error.title).toBe('missing attribute');
    });

    it('missing name → 422 "missing attribute" at /data/attributes/name', async () => {
      const error = expectErrorDocument(await postJson({ data: { type: 'workspaces', attributes: {} } }), 422);
      expect(error).toMatchObject({ title: 'missing attribute', source: { pointer: '/data/attributes/name' } });
    });

    it('wrong attribute type (name: 123) → 422 "invalid attribute" at /data/attributes/name', async () => {
      const error = expectErrorDocument(await postJson({ data: { type: 'workspaces', attributes: { name: 123 } } }), 422);
      expect(error).toMatchObject({ title: 'invalid attribute', source: { pointer: '/data/attributes/name' } });
    });

    it('__proto__ keys neither pollute Object.prototype nor cause a 500', async () => {
      const before = Object.getOwnPropertyNames(Object.prototype).sort();
      const top = await postJson('{"__proto__": {"polluted": "yes"}, "data": {"type": "workspaces", "attributes": {"name": "proto-top"}}}');
      expect(expectErrorDocument(top, 400).title).toBe('malformed JSON');
      const nested = await postJson(
        '{"data": {"type": "workspaces", "attributes": {"name": "proto-nested", "__proto__": {"polluted": "yes"}}}}',
      );
      expect(expectErrorDocument(nested, 400).title).toBe('malformed JSON');
      const constructor = await postJson(
        '{"constructor": {"prototype": {"polluted": "yes"}}, "data": {"type": "workspaces", "attributes": {"name": "proto-ctor"}}}',
      );
      expect(constructor.status).toBe(201);
      expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
      expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(before);
      // The server is still healthy and the poisoned bodies created nothing.
      const listed = await list('?page[size]=100');
      expect(names(listed)).toContain('proto-ctor');
      expect(names(listed).filter((name) => name.startsWith('proto-'))).toEqual(['proto-ctor']);
    });

    it('a NUL character in a string attribute → 422, not 500', async () => {
      const description = expectErrorDocument(await postJson(workspaceBody('nul-description', { description: 'a\u0000b' })), 422);
      expect(description.source).toEqual({ pointer: '/data/attributes/description' });
      expect(expectErrorDocument(await postJson(workspaceBody('nul\u0000name')), 422).source).toEqual({ pointer: '/data/attributes/name' });
      const directory = expectErrorDocument(await postJson(workspaceBody('nul-directory', { 'working-directory': '\u0000' })), 422);
      expect(directory.source).toEqual({ pointer: '/data/attributes/working-directory' });
    });

    it('NUL anywhere a value reaches the database → 4xx, never 5xx', async () => {
      const run = (attributes: Record<string, unknown>, relationships: Record<string, unknown> = {}) =>
        api(h, 'post', '/runs', token, {
          data: {
            type: 'runs',
            attributes,
            relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } }, ...relationships },
          },
        });
      expect(expectErrorDocument(await run({ message: 'a\u0000' }), 422).source).toEqual({ pointer: '/data/attributes/message' });
      expect(expectErrorDocument(await run({ 'plan-json': { deep: [{ value: 'x\u0000y' }] } }), 422).source).toEqual({
        pointer: '/data/attributes/plan-json',
      });
      expect(expectErrorDocument(await run({ 'plan-json': { 'key\u0000': 1 } }), 422).source).toEqual({
        pointer: '/data/attributes/plan-json',
      });
      const cv = await run({}, { 'configuration-version': { data: { type: 'configuration-versions', id: 'cv-\u0000' } } });
      expect(expectErrorDocument(cv, 422).source).toEqual({ pointer: '/data/relationships/configuration-version/data/id' });
      const ws = await api(h, 'post', '/runs', token, {
        data: { type: 'runs', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: 'ws-\u0000' } } } },
      });
      expect(expectErrorDocument(ws, 422).source).toEqual({ pointer: '/data/relationships/workspace/data/id' });
      // In the path: names nothing. In a filter: an invalid parameter.
      expect(expectErrorDocument(await api(h, 'get', '/workspaces/ws-%00', token), 404).title).toBe('not found');
      expect(expectErrorDocument(await api(h, 'get', '/organizations/%00/workspaces', token), 404).title).toBe('not found');
      const filter = expectErrorDocument(await api(h, 'get', '/team-workspaces?filter[workspace][id]=%00', token), 422);
      expect(filter.source).toEqual({ parameter: 'filter[workspace][id]' });
      // Nothing was created along the way.
      const runs = await api(h, 'get', `/workspaces/${workspaceId}/runs`, token);
      expect(runs.body.meta.pagination['total-count']).toBe(2);
    });
  });

  describe('routes, methods and errors', () => {
    it.each([
      ['get', '/api/v2/no-such-route'],
      ['post', '/api/v2/no-such-route'],
      ['get', '/no-such-route'],
      ['get', '/api/v2/organizations/edges/no-such-thing'],
    ] as const)('unknown route %s %s → 404 JSON:API', async (method, path) => {
      const res = await h.http[method](path).set('Authorization', `Bearer ${token}`);
      expect(expectErrorDocument(res, 404)).toEqual({ status: '404', title: 'not found' });
    });

    it.each([
      ['put', '/api/v2/ping'],
      ['delete', '/api/v2/organizations'],
      ['put', `/api/v2/organizations/${ORG}`],
      ['post', `/api/v2/organizations/${ORG}/entitlement-set`],
    ] as const)('wrong method %s %s → 405 JSON:API', async (method, path) => {
      const res = await h.http[method](path).set('Authorization', `Bearer ${token}`);
      const error = expectErrorDocument(res, 405);
      expect(error.title).toBe('method not allowed');
    });

    it.each([
      ['/api/v2/ping', 204],
      ['/API/V2/Ping', 204],
      ['/api/v2/ping/', 204],
      [`/api/v2/Organizations/${ORG}`, 200],
      ['/api/v2/pi%6Eg', 404],
      ['/api/v2', 404],
      ['/api/v2/', 404],
      ['/api/v2//ping', 404],
      ['/api/v3/ping', 404],
      ['/api/v2ping', 404],
      ['/api/v2/ping/extra', 404],
    ] as const)('GET %s → %i, the paths the routes match read as one router reads them', async (path, status) => {
      const res = await raw(h, 'GET', path, { Authorization: `Bearer ${token}` }, []);
      expect(res.status).toBe(status);
      if (status !== 204) expect(res.headers['content-type']).toContain(JSON_API);
    });

    it('GET /ping → 204 with what go-tfe reads: API version, a TFE release at or above v202404-1, not "HCP Terraform", no limit it is not held to', async () => {
      const res = await raw(h, 'GET', '/api/v2/ping', {}, []);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      expect({
        'tfp-api-version': res.headers['tfp-api-version'],
        'x-tfe-version': res.headers['x-tfe-version'],
        'tfp-appname': res.headers['tfp-appname'],
        'x-ratelimit-limit': res.headers['x-ratelimit-limit'],
      }).toEqual({
        'tfp-api-version': '2.6',
        'x-tfe-version': 'v202507-1',
        'tfp-appname': 'Run Tasks Service',
        // This harness's API has no rate limiter (no operations), so no limit is advertised; ping.int.test.ts
        // runs one at several limits.
        'x-ratelimit-limit': undefined,
      });
    });

    it.each(['/API/V2/ping', '/api/v2/Organizations'])('a wrong method on %s, in any case → 405', async (path) => {
      expectErrorDocument(await h.http.put(path).set('Authorization', `Bearer ${token}`), 405);
    });

    it('an unknown method on a known path → 405, not 501 or 500', async () => {
      const res = await raw(h, 'PROPFIND', '/api/v2/ping', {}, []);
      expect(res.status).toBe(405);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(JSON.parse(res.text)).toMatchObject({ errors: [{ status: '405' }] });
    });

    it('echoes a well-formed X-Request-Id and replaces a malformed one', async () => {
      const echoed = await api(h, 'get', '/no-such-route').set('X-Request-Id', 'edge-req.42_A');
      expectErrorDocument(echoed, 404);
      expect(echoed.headers['x-request-id']).toBe('edge-req.42_A');
      const replaced = await api(h, 'get', '/no-such-route').set('X-Request-Id', 'bad id <script>');
      expectErrorDocument(replaced, 404);
      expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    });

    it('401s follow the same error rules', async () => {
      expect(expectErrorDocument(await api(h, 'get', '/organizations'), 401)).toEqual({ status: '401', title: 'unauthorized' });
    });
  });

  describe('include on GET /runs/:run_id', () => {
    it("an unknown include → 400 with HCP's title and detail (which go-tfe and the Terraform CLI match), the specifics in meta", async () => {
      for (const [include, value] of [
        ['nope', 'nope'],
        ['task-stages,nope', 'nope'],
        ['workspace', 'workspace'],
      ]) {
        const error = expectErrorDocument(await api(h, 'get', `/runs/${runIds[0]}?include=${include}`, token), 400);
        expect(error).toEqual({
          status: '400',
          title: 'bad request',
          detail: 'Invalid include parameter',
          source: { parameter: 'include' },
          meta: {
            reason: `'${value}' is not a valid include here; allowed: task_stages, plan, apply.`,
            value,
            allowed: ['task_stages', 'plan', 'apply'],
          },
        });
      }
      expect(expectErrorDocument(await api(h, 'get', `/runs/${runIds[0]}?include=task_stages&include=task_stages`, token), 400)).toEqual({
        status: '400',
        title: 'bad request',
        detail: 'Invalid include parameter',
        source: { parameter: 'include' },
        meta: {
          reason: 'include must be given at most once.',
          value: ['task_stages', 'task_stages'],
          allowed: ['task_stages', 'plan', 'apply'],
        },
      });
    });

    it.each(['task-stages', 'task_stages'])('include=%s is accepted and includes exactly the related task stages', async (include) => {
      const res = await api(h, 'get', `/runs/${runIds[0]}?include=${include}`, token);
      expect(res.status).toBe(200);
      expect(res.body.data.id).toBe(runIds[0]);
      const related = (res.body.data.relationships['task-stages'].data as { id: string }[]).map((stage) => stage.id).sort();
      const included = (res.body.included ?? []) as { id: string; type: string }[];
      expect(included.every((resource) => resource.type === 'task-stages')).toBe(true);
      expect(included.map((resource) => resource.id).sort()).toEqual(related);
    });
  });
});
