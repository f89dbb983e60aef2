import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import { type Harness } from '../../../test/support/harness.ts';
import { api, JSON_API } from '../../../test/support/fixtures.ts';
import { type Response } from '../../../test/support/assertions.ts';
import { ORG, WORKSPACES, MiB, expectErrorDocument, raw, startEdges } from './http-edges.fixtures.ts';

/** HTTP edges: request bodies (media types, size, malformed and hostile JSON). */

describe('HTTP edges: request bodies', () => {
  let h: Harness;
  let token: string;
  let workspaceId: string;

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
    ({ h, token, workspaceId } = await startEdges());
  });

  afterAll(async () => {
    await h?.close();
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
});
