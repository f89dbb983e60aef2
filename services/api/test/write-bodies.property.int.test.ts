import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { JSON_API } from '../../../test/support/fixtures.ts';
import { startWriteContext, type WriteContext } from './write-bodies/fixtures.ts';
import { describeJsonProperties } from './write-bodies/json-properties.ts';
import { JSON_WRITE_ROUTES, keyOf, RAW_ROUTES, SPECS_TO_WRITE, WRITE_ROUTES } from './write-bodies/model.ts';
import { describeRawProperties } from './write-bodies/raw-properties.ts';

/**
 * Property-based tests over the request body of every write route (POST, PATCH, PUT in ROUTES):
 *
 * 1. No 5xx, ever: (a) for hostile bodies (arbitrary JSON, deep nesting, ~100 KB strings,
 *    __proto__/constructor/prototype keys, invalid UTF-8, NUL) and (b) for mutations of a valid
 *    document (a required field dropped, known fields set to wrong values). Every 4xx is a JSON:API
 *    error document, and no request adds to or changes Object.prototype.
 * 2. One wrong (or missing) known field → 422 whose pointer names that field.
 * 3. A run task description is counted in code points: 300 are accepted, 301 are not.
 * 4. Unknown attributes are ignored: a valid document with extra attributes still succeeds.
 * 5. Failed writes change nothing in the database.
 * 6. The upload route (`body: 'raw'`) takes bytes, not JSON: arbitrary bytes and content types to a
 *    fresh upload URL never give a 5xx, and only a real .tar.gz makes the version `uploaded`.
 *
 * Every JSON route is described by a WriteSpec in write-bodies/*.specs.ts (one module per group of
 * resources), every raw route by an entry of RAW_ROUTES (write-bodies/model.ts); a write route without
 * either fails the first test. The properties themselves live in write-bodies/*-properties.ts.
 */
describe('request bodies of every write route (property-based)', () => {
  // Filled in by beforeAll; the properties read it only when their tests run.
  const ctx = {} as WriteContext;

  beforeAll(async () => {
    Object.assign(ctx, await startWriteContext());
  }, 60_000);

  afterAll(async () => {
    await new Promise<void>((resolve) => ctx.taskServer.close(() => resolve()));
    await ctx.h.close();
    await ctx.issuer.close();
  });

  it('every write route has a body generator, and every generator a route', () => {
    const jsonKeys = JSON_WRITE_ROUTES.map(keyOf);
    const rawKeys = WRITE_ROUTES.filter((route) => route.body === 'raw').map(keyOf);
    expect(jsonKeys.filter((key) => !ctx.specs[key])).toEqual([]);
    expect(Object.keys(ctx.specs).filter((key) => !jsonKeys.includes(key))).toEqual([]);
    // Raw routes take bytes: a property of their own, and no JSON spec.
    expect(rawKeys.filter((key) => !RAW_ROUTES[key])).toEqual([]);
    expect(Object.keys(RAW_ROUTES).filter((key) => !rawKeys.includes(key))).toEqual([]);
    // The routes whose specs are still to be written are real write routes with JSON bodies, and tested elsewhere.
    const allKeys = WRITE_ROUTES.map(keyOf);
    expect(Object.keys(SPECS_TO_WRITE).filter((key) => !allKeys.includes(key))).toEqual([]);
    for (const file of new Set(Object.values(SPECS_TO_WRITE))) expect(existsSync(new URL(`./${file}`, import.meta.url))).toBe(true);
    expect(WRITE_ROUTES.length).toBe(jsonKeys.length + rawKeys.length + Object.keys(SPECS_TO_WRITE).length);
  });

  it('a configuration version needs no body: none, `{}` and an empty document get the defaults', async () => {
    const path = `/api/v2/workspaces/${ctx.wsVersions}/configuration-versions`;
    const auth = `Bearer ${ctx.h.adminToken}`;
    for (const res of [
      await ctx.h.http.post(path).set('Authorization', auth),
      await ctx.h.http.post(path).set('Authorization', auth).set('Content-Type', JSON_API).send('{}'),
      await ctx.h.http
        .post(path)
        .set('Authorization', auth)
        .set('Content-Type', 'application/json')
        .send('{"data":{"type":"configuration-versions"}}'),
    ]) {
      expect({ status: res.status, text: res.status === 201 ? '' : res.text }).toEqual({ status: 201, text: '' });
      expect(res.body.data.attributes).toMatchObject({ status: 'pending', 'auto-queue-runs': true, speculative: false });
    }
  });

  describeJsonProperties(ctx);
  describeRawProperties(ctx);
});
