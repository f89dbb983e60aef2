import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { RouteDef } from '../routes/define.ts';
import { ROUTES } from '../routes/index.ts';
import { API_VERSION, buildOpenApiDocument, type JsonSchema, type OpenApiDocument } from './document.ts';
import { referenceHtml, referencePolicy } from './reference-page.ts';

const document = buildOpenApiDocument(ROUTES, 'https://runtasks.example.com');
const openApiPath = (path: string): string => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const operationOf = (doc: OpenApiDocument, route: RouteDef) => doc.paths[openApiPath(route.path)]?.[route.method.toLowerCase()];
const keyOf = (route: RouteDef): string => `${route.method} ${route.path}`;
const WRITES = new Set(['POST', 'PATCH', 'PUT']);

function resolve(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  return ref
    .slice(2)
    .split('/')
    .map((part) => decodeURIComponent(part).replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>(
      (node, part) => (node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined),
      doc,
    );
}

function refsIn(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) refsIn(item, found);
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.push(value);
      else refsIn(value, found);
    }
  }
  return found;
}

function unresolvedRefs(doc: unknown): string[] {
  return refsIn(doc).filter((ref) => resolve(doc, ref) === undefined);
}

/** The request body's schema, with its top-level `$ref` followed. */
function requestSchemaOf(doc: OpenApiDocument, route: RouteDef): JsonSchema | undefined {
  const content = operationOf(doc, route)?.requestBody?.content;
  const schema = content?.['application/vnd.api+json']?.schema ?? content?.['application/json']?.schema;
  const target = schema?.['$ref'];
  return typeof target === 'string' ? (resolve(doc, target) as JsonSchema | undefined) : schema;
}

describe('OpenAPI document', () => {
  it('is an OpenAPI 3.1 document that survives JSON serialization', () => {
    expect(document.openapi).toMatch(/^3\.1\.\d+$/);
    expect(document.info.title).toBe('Run Tasks Service API');
    expect(document.info.version).toBe(API_VERSION);
    expect(document.servers).toEqual([{ url: 'https://runtasks.example.com/api/v2' }]);
    expect(Object.keys(document.paths).length).toBeGreaterThan(0);
    expect(JSON.parse(JSON.stringify(document))).toEqual(document);
  });

  it("takes its version from the API package's", () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(API_VERSION).toBe(pkg.version);
  });

  it('drops a trailing slash from the server URL', () => {
    expect(buildOpenApiDocument([], 'http://localhost:3000/').servers).toEqual([{ url: 'http://localhost:3000/api/v2' }]);
  });

  it('describes every route in the route table', () => {
    const missing = ROUTES.filter((route) => operationOf(document, route) === undefined).map(keyOf);
    expect(missing).toEqual([]);
    const operations = Object.values(document.paths).flatMap((item) => Object.keys(item));
    expect(operations).toHaveLength(ROUTES.length);
  });

  it('gives every operation a unique operationId, a summary and a tag', () => {
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    const ids = operations.map((operation) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const operation of operations) {
      expect(operation.summary).toBeTruthy();
      expect(operation.tags).toHaveLength(1);
    }
  });

  it('gives every route a summary in the route table', () => {
    expect(ROUTES.filter((route) => !route.summary).map(keyOf)).toEqual([]);
  });

  it('declares every path parameter', () => {
    for (const route of ROUTES) {
      const names = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1]);
      const declared = (operationOf(document, route)?.parameters ?? [])
        .filter((parameter) => parameter['in'] === 'path')
        .map((parameter) => parameter['name']);
      expect([keyOf(route), declared]).toEqual([keyOf(route), names]);
    }
  });

  it('maps auth to security requirements', () => {
    for (const route of ROUTES) {
      const security = operationOf(document, route)?.security ?? [];
      const schemes = security.flatMap((requirement) => Object.keys(requirement)).sort();
      const expected = {
        public: [],
        token: ['bearerAuth'],
        'token-or-task': ['bearerAuth', 'taskAccessToken'],
        callback: ['taskAccessToken'],
        'audit-trail': ['bearerAuth'],
      };
      expect([keyOf(route), schemes]).toEqual([keyOf(route), expected[route.auth]]);
    }
    for (const scheme of ['bearerAuth', 'taskAccessToken']) expect(document.components.securitySchemes[scheme]).toBeDefined();
  });

  it('gives every write route with a JSON body a request schema, for both JSON media types', () => {
    const writes = ROUTES.filter((route) => WRITES.has(route.method) && route.body !== 'raw');
    expect(writes.length).toBeGreaterThan(0);
    for (const route of writes) {
      expect([keyOf(route), route.requestSchema !== undefined]).toEqual([keyOf(route), true]);
      const content = operationOf(document, route)?.requestBody?.content ?? {};
      expect([keyOf(route), Object.keys(content).sort()]).toEqual([keyOf(route), ['application/json', 'application/vnd.api+json']]);
      const schema = requestSchemaOf(document, route);
      expect([keyOf(route), schema !== undefined && Object.keys(schema).length > 0]).toEqual([keyOf(route), true]);
    }
  });

  it('describes raw bodies by their media type: archives as octet-stream, reported plans as JSON', () => {
    const raw = ROUTES.filter((route) => route.body === 'raw');
    expect(raw.length).toBeGreaterThan(0);
    const planReports = raw.filter((route) => route.path.endsWith('/json-output'));
    expect(planReports.map((route) => route.rawBody?.mediaType)).toEqual(['application/json', 'application/json']);
    for (const route of planReports) {
      const operation = operationOf(document, route);
      expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(['200', '404', '409', '413', '415', '422']));
      expect(operation?.description).toContain('local');
    }
    for (const route of raw) {
      expect(Object.keys(operationOf(document, route)?.requestBody?.content ?? {})).toEqual([
        route.rawBody?.mediaType ?? 'application/octet-stream',
      ]);
    }
  });

  it('generates request bodies from the validating zod schemas', () => {
    const route = ROUTES.find(
      (candidate) => candidate.method === 'POST' && candidate.path === '/organizations/:organization_name/workspaces',
    );
    const schema = requestSchemaOf(document, route as RouteDef) as JsonSchema;
    const data = (schema['properties'] as Record<string, JsonSchema>)['data'] as JsonSchema;
    const properties = data['properties'] as Record<string, JsonSchema>;
    expect(properties['type']).toMatchObject({ const: 'workspaces' });
    const attributes = properties['attributes'] as JsonSchema;
    expect(attributes['required']).toEqual(['name']);
    expect((attributes['properties'] as Record<string, JsonSchema>)['name']).toMatchObject({ type: 'string', minLength: 1, maxLength: 90 });
    // Refinements have no JSON Schema form: their messages are kept as descriptions.
    expect(JSON.stringify(schema)).toContain('must not contain NUL characters');
  });

  it('marks bodies the handler may omit as optional, and the rest as required', () => {
    const byKey = new Map(ROUTES.map((route) => [keyOf(route), operationOf(document, route)]));
    expect(byKey.get('POST /runs/:run_id/actions/apply')?.requestBody?.required).toBe(false);
    expect(byKey.get('POST /workspaces/:workspace_id/configuration-versions')?.requestBody?.required).toBe(false);
    expect(byKey.get('POST /organizations/:organization_name/authentication-token')?.requestBody?.required).toBe(false);
    expect(byKey.get('POST /runs')?.requestBody?.required).toBe(true);
    // A union with z.undefined() is "no body", not "any body".
    const route: RouteDef = {
      method: 'POST',
      path: '/maybe',
      auth: 'token',
      requestSchema: z.union([z.undefined(), z.object({ data: z.object({ type: z.literal('maybe') }) })]),
      handler: async () => {},
    };
    const doc = buildOpenApiDocument([route], 'http://localhost');
    expect(operationOf(doc, route)?.requestBody?.required).toBe(false);
    expect(requestSchemaOf(doc, route)).toMatchObject({ type: 'object', required: ['data'] });
    expect(requestSchemaOf(doc, route)).not.toHaveProperty('anyOf');
  });

  it('declares page parameters on paginated collections and include where the handler accepts it', () => {
    for (const route of ROUTES.filter((candidate) => candidate.query?.page)) {
      const names = JSON.stringify(operationOf(document, route)?.parameters ?? []);
      expect([keyOf(route), names]).toEqual([keyOf(route), expect.stringContaining('#/components/parameters/PageNumber')]);
      expect(names).toContain('#/components/parameters/PageSize');
    }
    for (const route of ROUTES.filter((candidate) => candidate.query?.include)) {
      const include = (operationOf(document, route)?.parameters ?? []).find((parameter) => parameter['name'] === 'include');
      expect([keyOf(route), include?.['schema']]).toEqual([
        keyOf(route),
        { type: 'array', items: { type: 'string', enum: [...(route.query?.include ?? [])] } },
      ]);
    }
  });

  // A guard on the route table: the handler's source names what it parses, and the route must declare it.
  it('declares the schema and query parameters the handlers parse', () => {
    const problems: string[] = [];
    let parsing = 0;
    for (const route of ROUTES) {
      const source = route.handler.toString();
      if (/parseWith\(|parse\w+Attributes\(|parsePage\(|parseInclude\(/.test(source)) parsing++;
      if (/parseWith\(|parse\w+Attributes\(/.test(source) && !route.requestSchema) problems.push(`${keyOf(route)}: no requestSchema`);
      if (source.includes('parsePage(') && !route.query?.page) problems.push(`${keyOf(route)}: no query.page`);
      if (source.includes('parseInclude(') && !route.query?.include) problems.push(`${keyOf(route)}: no query.include`);
    }
    expect(problems).toEqual([]);
    // Not vacuous: the handlers' source is readable here.
    expect(parsing).toBeGreaterThan(ROUTES.length / 2);
  });

  it('gives every operation a success response and JSON:API error responses defined once', () => {
    for (const operation of Object.values(document.paths).flatMap((item) => Object.values(item))) {
      const codes = Object.keys(operation.responses);
      expect(codes.some((code) => /^2\d\d$/.test(code))).toBe(true);
      for (const code of codes.filter((candidate) => /^[45]/.test(candidate))) {
        expect(operation.responses[code]?.['$ref']).toMatch(/^#\/components\/responses\//);
      }
    }
    for (const name of [
      'BadRequest',
      'Unauthorized',
      'NotFound',
      'MethodNotAllowed',
      'Conflict',
      'UnsupportedMediaType',
      'UnprocessableEntity',
      'TooManyRequests',
    ]) {
      expect(document.components.responses[name]).toBeDefined();
    }
    expect(document.components.schemas['Errors']).toBeDefined();
  });

  it('resolves every $ref within the document', () => {
    expect(refsIn(document).length).toBeGreaterThan(0);
    expect(unresolvedRefs(document)).toEqual([]);
  });

  it('never throws on schemas JSON Schema cannot express, and says what it could not represent', () => {
    interface Tree {
      name: string;
      children: Tree[];
    }
    const tree: z.ZodType<Tree> = z.lazy(() => z.object({ name: z.string(), children: z.array(tree) }));
    const handler = async (): Promise<void> => {};
    const routes: RouteDef[] = [
      { method: 'POST', path: '/tree', auth: 'token', requestSchema: tree, handler },
      {
        method: 'POST',
        path: '/odd',
        auth: 'token',
        requestSchema: z.object({ when: z.date(), big: z.bigint(), mapped: z.string().transform((value) => value.length) }),
        handler,
      },
      { method: 'PATCH', path: '/output-only', auth: 'token', requestSchema: z.transform((value: unknown) => String(value)), handler },
      { method: 'PUT', path: '/broken', auth: 'token', requestSchema: {} as z.ZodType, handler },
      { method: 'POST', path: '/undeclared', auth: 'token', handler },
    ];
    const doc = buildOpenApiDocument(routes, 'http://localhost');
    expect(unresolvedRefs(doc)).toEqual([]);
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
    const notes = (path: string) => Object.values(doc.paths[path] ?? {})[0]?.['x-unrepresentable'] ?? [];
    expect(notes('/odd').join(' ')).toMatch(/when/);
    expect(notes('/odd').join(' ')).toMatch(/big/);
    expect(notes('/broken').join(' ')).toMatch(/not convertible/);
    for (const route of routes) expect(requestSchemaOf(doc, route)).toBeDefined();
  });
});

describe('API reference page', () => {
  const page = referenceHtml('/openapi.json');

  it('loads its scripts and styles from this origin only, and has no inline script', () => {
    expect(page.startsWith('<!doctype html>')).toBe(true);
    const sources = [...page.matchAll(/<(?:script|link)\b[^>]*\s(?:src|href)="([^"]*)"/gi)].map((match) => match[1]);
    expect(sources.length).toBeGreaterThanOrEqual(4);
    for (const source of sources) expect(source).toMatch(/^\/docs\/assets\/[\w.-]+$/);
    expect(page).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/i);
    expect(page).not.toMatch(/<iframe\b|\son\w+=/i);
  });

  it('names the given OpenAPI URL, which cannot break out of its attribute', () => {
    expect(page).toContain('data-openapi-url="/openapi.json"');
    const hostile = referenceHtml('/x"><script>alert(1)</script>');
    expect(hostile).not.toContain('<script>alert');
    expect(hostile).toContain('data-openapi-url="/x&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"');
  });

  it('allows scripts from this origin only, and calls to the API at its public base URL', () => {
    const policy = referencePolicy('https://tfe.example.com/some/path');
    const directive = (name: string) => policy.split('; ').find((part) => part.startsWith(`${name} `));
    expect(directive('script-src')).toBe("script-src 'self'");
    expect(directive('style-src')).toBe("style-src 'self' 'unsafe-inline'");
    expect(directive('img-src')).toBe("img-src 'self' data:");
    expect(directive('connect-src')).toBe("connect-src 'self' https://tfe.example.com");
    expect(directive('default-src')).toBe("default-src 'none'");
  });
});
