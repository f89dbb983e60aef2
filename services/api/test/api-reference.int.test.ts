import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NOT_FOUND } from '../../../test/support/assertions.ts';
import { JSON_API } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { referencePolicy } from '../src/openapi/reference-page.ts';

/** The API reference page (Swagger UI) and its assets over HTTP: public, as /openapi.json is, with the page's own CSP. */

const SWAGGER_UI = dirname(fileURLToPath(import.meta.resolve('swagger-ui-dist/package.json')));
const OWN = fileURLToPath(new URL('../src/openapi/assets/', import.meta.url));
const ASSETS: [string, string, string][] = [
  ['swagger-ui.css', 'text/css', join(SWAGGER_UI, 'swagger-ui.css')],
  ['index.css', 'text/css', join(SWAGGER_UI, 'index.css')],
  ['swagger-ui-bundle.js', 'text/javascript', join(SWAGGER_UI, 'swagger-ui-bundle.js')],
  ['favicon-32x32.png', 'image/png', join(SWAGGER_UI, 'favicon-32x32.png')],
  ['reference-init.js', 'text/javascript', join(OWN, 'reference-init.js')],
];

describe('the API reference page', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
  }, 60_000);

  afterAll(async () => {
    await h?.close();
  }, 30_000);

  it('serves the page without a token, whatever token is sent, with its own Content-Security-Policy', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-a-token' }] as Record<string, string>[]) {
      const res = await fetch(`${h.baseUrl}/docs`, { headers });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('content-security-policy')).toBe(referencePolicy(h.config.publicBaseUrl));
      expect(res.headers.get('content-security-policy')).toContain("connect-src 'self' http://runtasks.test");
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const html = await res.text();
      for (const [name] of ASSETS) expect(html).toContain(`/docs/assets/${name}`);
      expect(html).toContain('data-openapi-url="/openapi.json"');
    }
    const head = await fetch(`${h.baseUrl}/docs`, { method: 'HEAD' });
    expect(head.status).toBe(200);
  });

  it('serves each asset from the installed package (and our initializer) with its type', async () => {
    for (const [name, type, file] of ASSETS) {
      const res = await fetch(`${h.baseUrl}/docs/assets/${name}`);
      expect({ name, status: res.status }).toEqual({ name, status: 200 });
      expect(res.headers.get('content-type')).toContain(type);
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('cache-control')).toBe('public, max-age=3600');
      expect(Buffer.from(await res.arrayBuffer()).equals(readFileSync(file))).toBe(true);
    }
  });

  it('answers a JSON:API 404 for any other file, however the path is spelled', async () => {
    for (const path of [
      '/docs/assets/package.json',
      '/docs/assets/%2e%2e/%2e%2e/package.json',
      '/docs/assets/..%2f..%2fpackage.json',
      '/docs/assets/swagger-ui.css.map',
      '/docs/assets/',
      '/docs/swagger-ui-bundle.js',
    ]) {
      const res = await fetch(`${h.baseUrl}${path}`);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expect(res.headers.get('content-type')).toContain(JSON_API);
      expect(await res.json()).toEqual(NOT_FOUND);
    }
  });

  it('keeps /openapi.json, the document the page reads', async () => {
    const res = await fetch(`${h.baseUrl}/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toContain('/runs');
  });
});
