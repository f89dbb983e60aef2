import { z } from 'zod';
import { JSON_BODY_LIMIT } from '../http/body.ts';
import { API_PREFIX, MEDIA_TYPE } from '../http/jsonapi.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../http/pagination.ts';
import type { HttpMethod, RouteDef } from '../routes/define.ts';

/**
 * The OpenAPI 3.1 document, generated from the route table: every route, and for every body the
 * JSON Schema of the very zod schema that validates it (input side), so the two cannot drift.
 */

/** services/api/package.json's version (the unit test keeps them equal). */
export const API_VERSION = '0.1.0';
export const OPENAPI_VERSION = '3.1.1';

export type JsonSchema = { [key: string]: unknown };
export type OpenApiDocument = {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers: { url: string }[];
  tags: { name: string }[];
  paths: Record<string, Record<string, OperationObject>>;
  components: {
    securitySchemes: Record<string, JsonSchema>;
    schemas: Record<string, JsonSchema>;
    parameters: Record<string, JsonSchema>;
    responses: Record<string, JsonSchema>;
  };
};
export type OperationObject = {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  security: Record<string, string[]>[];
  parameters?: JsonSchema[];
  requestBody?: { required: boolean; description?: string; content: Record<string, { schema: JsonSchema }> };
  responses: Record<string, JsonSchema>;
  'x-auth': RouteDef['auth'];
  /** Parts of the request schema with no JSON Schema equivalent (shown as `{}`, "any value"). */
  'x-unrepresentable'?: string[];
};

const JSON_TYPES = [MEDIA_TYPE, 'application/json'] as const;
const ref = (section: string, name: string): JsonSchema => ({ $ref: `#/components/${section}/${name}` });
const COMPONENT_NAME = /[^A-Za-z0-9._-]/g;

// ---------------------------------------------------------------- zod → JSON Schema

interface Converted {
  schema: JsonSchema;
  /** `$defs` (recursive or registered schemas), to be hoisted into components.schemas. */
  defs: Record<string, JsonSchema>;
  notes: string[];
}

type ZodInternal = { _zod: { def: { type: string; checks?: { _zod: { def: { check: string; error?: unknown } } }[] } } };

/** The messages of `.refine()` checks: JSON Schema cannot express them, so they go into the description. */
function refinementMessages(schema: unknown): string[] {
  const checks = (schema as ZodInternal)._zod.def.checks ?? [];
  const messages: string[] = [];
  for (const check of checks) {
    const def = check._zod.def;
    if (def.check !== 'custom') continue;
    let message: string | undefined;
    try {
      const result: unknown = typeof def.error === 'function' ? def.error({ code: 'custom', input: undefined, path: [] }) : def.error;
      message = typeof result === 'string' ? result : (result as { message?: string } | undefined)?.message;
    } catch {
      message = undefined;
    }
    messages.push(message ?? 'a custom check');
  }
  return messages;
}

function addRefinements(schema: unknown, json: JsonSchema): void {
  const messages = refinementMessages(schema);
  if (messages.length === 0) return;
  const note = `Also checked: ${messages.join('; ')}.`;
  const current = typeof json['description'] === 'string' ? json['description'] : '';
  // The override can run more than once on the same object: add the note once.
  if (!current.includes(note)) json['description'] = current ? `${current} ${note}` : note;
}

function pointerOf(path: readonly (string | number)[]): string {
  return '/' + path.map(String).join('/');
}

function convert(schema: z.ZodType): Converted {
  const notes: string[] = [];
  try {
    const json = z.toJSONSchema(schema, {
      target: 'draft-2020-12',
      io: 'input',
      unrepresentable: ({ zodSchema, path, message }) => {
        // `z.undefined()` in a union means "no body": it matches no JSON value (the body's `required` says it may be absent).
        if (zodSchema._zod.def.type === 'undefined') return { not: {} };
        notes.push(`${pointerOf(path)}: ${message}`);
        return 'any';
      },
      override: ({ zodSchema, jsonSchema }) => addRefinements(zodSchema, jsonSchema as JsonSchema),
    }) as JsonSchema;
    const { $schema: _dialect, $defs, ...rest } = json;
    return { schema: rest, defs: ($defs ?? {}) as Record<string, JsonSchema>, notes };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    notes.push(`/: not convertible (${reason})`);
    return { schema: { description: `The request schema could not be converted to JSON Schema: ${reason}` }, defs: {}, notes };
  }
}

/** Applies `visit` to every schema object in the tree, bottom-up; its result replaces the node. */
function mapSchemas(node: unknown, visit: (schema: JsonSchema) => JsonSchema): unknown {
  if (Array.isArray(node)) return node.map((item) => mapSchemas(item, visit));
  if (node === null || typeof node !== 'object') return node;
  const mapped: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    // `const`, `default`, `enum` and `examples` hold values, not schemas.
    mapped[key] = key === 'const' || key === 'default' || key === 'enum' || key === 'examples' ? value : mapSchemas(value, visit);
  }
  return visit(mapped);
}

const isNever = (value: unknown): boolean =>
  typeof value === 'object' &&
  value !== null &&
  Object.keys(value).length === 1 &&
  'not' in value &&
  Object.keys((value as JsonSchema)['not'] as object).length === 0;

/** Drops `{not: {}}` members of `anyOf` (from `z.undefined()`), unwrapping a single survivor. */
function dropNever(schema: JsonSchema): JsonSchema {
  const anyOf = schema['anyOf'];
  if (!Array.isArray(anyOf) || !anyOf.some(isNever)) return schema;
  const kept = anyOf.filter((member) => !isNever(member));
  const { anyOf: _dropped, ...rest } = schema;
  if (kept.length === 0) return { ...rest, not: {} };
  if (kept.length === 1) return { ...(kept[0] as JsonSchema), ...rest };
  return { ...rest, anyOf: kept };
}

/** Places a converted schema under components.schemas[name], its `$defs` beside it, with every `$ref` rewritten to match. */
function register(schemas: Record<string, JsonSchema>, name: string, converted: Converted): void {
  const defName = (def: string): string => `${name}.${def}`.replace(COMPONENT_NAME, '_');
  const rewrite = (schema: JsonSchema): JsonSchema => {
    const target = schema['$ref'];
    if (typeof target !== 'string') return dropNever(schema);
    if (target === '#') return dropNever({ ...schema, $ref: `#/components/schemas/${name}` });
    if (target.startsWith('#/$defs/')) {
      return dropNever({ ...schema, $ref: `#/components/schemas/${defName(decodeURIComponent(target.slice('#/$defs/'.length)))}` });
    }
    return dropNever(schema);
  };
  schemas[name] = mapSchemas(converted.schema, rewrite) as JsonSchema;
  for (const [def, schema] of Object.entries(converted.defs)) schemas[defName(def)] = mapSchemas(schema, rewrite) as JsonSchema;
}

/** Whether the schema accepts a request without a body (a union with `z.undefined()`, `.optional()`). */
function acceptsNoBody(schema: z.ZodType): boolean {
  try {
    return schema.safeParse(undefined).success;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------- routes → operations

const pathParams = (path: string): string[] => [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1] as string);
const openApiPath = (path: string): string => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const pascal = (text: string): string =>
  text
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((word) => word.charAt(0).toUpperCase() + word.slice(1))
    .join('');

/** `GET /organizations/:organization_name/tasks` → `getOrganizationsByOrganizationNameTasks`. */
export function operationIdOf(method: HttpMethod, path: string): string {
  const parts = path
    .split('/')
    .filter(Boolean)
    .map((segment) => (segment.startsWith(':') ? `By${pascal(segment.slice(1))}` : pascal(segment)));
  return method.toLowerCase() + (parts.join('') || 'Root');
}

/** The group a route is listed under: its path's first segment. */
export const tagOf = (path: string): string => path.split('/').find((segment) => segment !== '') ?? 'root';

const SECURITY: Record<RouteDef['auth'], Record<string, string[]>[]> = {
  public: [],
  token: [{ bearerAuth: [] }],
  'token-or-task': [{ bearerAuth: [] }, { taskAccessToken: [] }],
  callback: [{ taskAccessToken: [] }],
};

const isWrite = (method: HttpMethod): boolean => method === 'POST' || method === 'PATCH' || method === 'PUT';
const hasJsonBody = (route: RouteDef): boolean => route.body !== 'raw' && (route.requestSchema !== undefined || isWrite(route.method));

function success(route: RouteDef): [string, JsonSchema] {
  const status = route.response?.status ?? (route.method === 'POST' ? 201 : route.method === 'DELETE' ? 204 : 200);
  const content = route.response?.content ?? (status === 204 ? 'none' : 'jsonapi');
  switch (content) {
    case 'none':
      return [String(status), { description: status === 202 ? 'Accepted (no body)' : 'Success (no body)' }];
    case 'binary':
      return [
        String(status),
        { description: 'The file', content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } } },
      ];
    case 'json':
      return [String(status), { description: 'A JSON document', content: { 'application/json': { schema: { type: 'object' } } } }];
    case 'jsonapi':
      return [
        String(status),
        {
          description: route.query?.page ? 'A page of the collection' : 'The resource',
          content: { [MEDIA_TYPE]: { schema: ref('schemas', route.query?.page ? 'CollectionDocument' : 'Document') } },
        },
      ];
  }
}

function errorResponses(route: RouteDef, jsonBody: boolean): Record<string, JsonSchema> {
  const responses: Record<string, JsonSchema> = {};
  const hasQuery = route.query !== undefined;
  if (jsonBody || route.query?.include) responses['400'] = ref('responses', 'BadRequest');
  if (route.auth !== 'public') responses['401'] = ref('responses', 'Unauthorized');
  if (route.auth !== 'public' || pathParams(route.path).length > 0) responses['404'] = ref('responses', 'NotFound');
  responses['405'] = ref('responses', 'MethodNotAllowed');
  if (route.method !== 'GET') responses['409'] = ref('responses', 'Conflict');
  if (jsonBody || route.body === 'raw') responses['413'] = ref('responses', 'PayloadTooLarge');
  if (jsonBody || route.rawBody) responses['415'] = ref('responses', 'UnsupportedMediaType');
  if (jsonBody || hasQuery || route.body === 'raw') responses['422'] = ref('responses', 'UnprocessableEntity');
  responses['429'] = ref('responses', 'TooManyRequests');
  return responses;
}

function parametersOf(route: RouteDef): JsonSchema[] {
  const parameters: JsonSchema[] = pathParams(route.path).map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string', minLength: 1 },
  }));
  if (route.query?.page) parameters.push(ref('parameters', 'PageNumber'), ref('parameters', 'PageSize'));
  if (route.query?.include) {
    const allowed = [...route.query.include];
    parameters.push({
      name: 'include',
      in: 'query',
      required: false,
      description: `Related resources to include, comma-separated: ${allowed.join(', ')} (hyphens may replace underscores).`,
      style: 'form',
      explode: false,
      schema: { type: 'array', items: { type: 'string', enum: allowed } },
    });
  }
  for (const name of route.query?.params ?? []) parameters.push({ name, in: 'query', required: false, schema: { type: 'string' } });
  return parameters;
}

function describe(route: RouteDef, jsonBody: boolean): string | undefined {
  const lines: string[] = [];
  if (route.auth === 'token-or-task')
    lines.push("Authorized by an API token, or by a task result's access token for that result's own run.");
  if (route.auth === 'callback') lines.push("Authorized by the task result's own access token only, not by API tokens.");
  if (route.notes) lines.push(route.notes);
  if (jsonBody) lines.push(`Body limit: ${route.bodyLimit ?? JSON_BODY_LIMIT}.`);
  return lines.length > 0 ? lines.join(' ') : undefined;
}

function operationOf(route: RouteDef, operationId: string, schemas: Record<string, JsonSchema>): OperationObject {
  const jsonBody = hasJsonBody(route);
  const operation: OperationObject = {
    operationId,
    summary: route.summary ?? `${route.method} ${route.path}`,
    tags: [tagOf(route.path)],
    security: SECURITY[route.auth],
    responses: Object.fromEntries([success(route), ...Object.entries(errorResponses(route, jsonBody))]),
    'x-auth': route.auth,
  };
  const description = describe(route, jsonBody);
  if (description) operation.description = description;
  const parameters = parametersOf(route);
  if (parameters.length > 0) operation.parameters = parameters;
  if (route.body === 'raw') {
    const raw = route.rawBody;
    operation.requestBody = raw
      ? { required: true, description: raw.description, content: { [raw.mediaType]: { schema: { type: 'object' } } } }
      : {
          required: true,
          description: 'The raw bytes (a .tar.gz archive).',
          content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
        };
  } else if (jsonBody) {
    const name = `${operationId}Request`.replace(COMPONENT_NAME, '_');
    const converted: Converted = route.requestSchema
      ? convert(route.requestSchema)
      : { schema: { description: 'The body is not described: the handler declares no request schema.' }, defs: {}, notes: [] };
    register(schemas, name, converted);
    const required = route.requestSchema !== undefined && !route.optionalBody && !acceptsNoBody(route.requestSchema);
    operation.requestBody = {
      required,
      ...(required ? {} : { description: 'The body is optional.' }),
      content: Object.fromEntries(JSON_TYPES.map((type) => [type, { schema: ref('schemas', name) }])),
    };
    if (converted.notes.length > 0) operation['x-unrepresentable'] = converted.notes;
  }
  return operation;
}

// ---------------------------------------------------------------- shared components

const errorResponse = (description: string, headers?: JsonSchema): JsonSchema => ({
  description,
  ...(headers ? { headers } : {}),
  content: { [MEDIA_TYPE]: { schema: ref('schemas', 'Errors') } },
});

function baseComponents(): OpenApiDocument['components'] {
  const nullableString = { type: ['string', 'null'] };
  return {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description: 'An API token (site admin, organization or team): `Authorization: Bearer <token>`.',
      },
      taskAccessToken: {
        type: 'http',
        scheme: 'bearer',
        description:
          "A task result's access token, sent to the task server as `access_token` in the run task request. " +
          "It authorizes that result's callback and reading its run's plan JSON and configuration version, until the result is final.",
      },
    },
    schemas: {
      Error: {
        type: 'object',
        required: ['status', 'title'],
        properties: {
          status: { type: 'string', description: 'The HTTP status, as a string.' },
          title: { type: 'string' },
          detail: { type: 'string' },
          source: {
            type: 'object',
            properties: {
              pointer: { type: 'string', description: 'A JSON Pointer to the offending part of the body.' },
              parameter: { type: 'string', description: 'The offending query parameter.' },
            },
          },
        },
      },
      Errors: {
        type: 'object',
        required: ['errors'],
        properties: { errors: { type: 'array', minItems: 1, items: ref('schemas', 'Error') } },
      },
      ResourceIdentifier: {
        type: 'object',
        required: ['id', 'type'],
        properties: { id: { type: 'string' }, type: { type: 'string' } },
      },
      Relationship: {
        type: 'object',
        properties: {
          data: {
            anyOf: [ref('schemas', 'ResourceIdentifier'), { type: 'array', items: ref('schemas', 'ResourceIdentifier') }, { type: 'null' }],
          },
          links: { type: 'object', additionalProperties: { type: 'string' } },
        },
      },
      Resource: {
        type: 'object',
        required: ['id', 'type', 'attributes'],
        properties: {
          id: { type: 'string' },
          type: { type: 'string' },
          attributes: { type: 'object' },
          relationships: { type: 'object', additionalProperties: ref('schemas', 'Relationship') },
          links: { type: 'object', additionalProperties: { type: 'string' } },
        },
      },
      PaginationMeta: {
        type: 'object',
        properties: {
          'current-page': { type: 'integer' },
          'page-size': { type: 'integer' },
          'prev-page': { type: ['integer', 'null'] },
          'next-page': { type: ['integer', 'null'] },
          'total-pages': { type: 'integer' },
          'total-count': { type: 'integer' },
        },
      },
      Document: {
        type: 'object',
        required: ['data'],
        properties: {
          data: { anyOf: [ref('schemas', 'Resource'), { type: 'null' }] },
          included: { type: 'array', items: ref('schemas', 'Resource') },
          links: { type: 'object', additionalProperties: nullableString },
          meta: { type: 'object' },
        },
      },
      CollectionDocument: {
        type: 'object',
        required: ['data'],
        properties: {
          data: { type: 'array', items: ref('schemas', 'Resource') },
          included: { type: 'array', items: ref('schemas', 'Resource') },
          links: {
            type: 'object',
            properties: { self: nullableString, first: nullableString, prev: nullableString, next: nullableString, last: nullableString },
          },
          meta: { type: 'object', properties: { pagination: ref('schemas', 'PaginationMeta') } },
        },
      },
    },
    parameters: {
      PageNumber: {
        name: 'page[number]',
        in: 'query',
        required: false,
        description: 'The page to return, from 1.',
        schema: { type: 'integer', minimum: 1, default: 1 },
      },
      PageSize: {
        name: 'page[size]',
        in: 'query',
        required: false,
        description: `Items per page, at most ${MAX_PAGE_SIZE}.`,
        schema: { type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, default: DEFAULT_PAGE_SIZE },
      },
    },
    responses: {
      BadRequest: errorResponse('Malformed JSON, or an invalid include parameter'),
      Unauthorized: errorResponse('Missing, invalid, expired or revoked token'),
      NotFound: errorResponse('Not found, or not visible to this token (the two are indistinguishable)'),
      MethodNotAllowed: errorResponse('The path does not accept this method'),
      Conflict: errorResponse('The transition is not allowed in the current state, or a concurrent change won'),
      PayloadTooLarge: errorResponse('The body exceeds the limit'),
      UnsupportedMediaType: errorResponse('The Content-Type is not application/vnd.api+json or application/json'),
      UnprocessableEntity: errorResponse('An invalid or missing attribute or query parameter (see source.pointer / source.parameter)'),
      TooManyRequests: errorResponse('Rate limited', { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } }),
    },
  };
}

// ---------------------------------------------------------------- the document

/** The OpenAPI 3.1 document for `routes`, served from `serverUrl` (the public base URL, without /api/v2). */
export function buildOpenApiDocument(routes: readonly RouteDef[], serverUrl: string): OpenApiDocument {
  const components = baseComponents();
  const paths: OpenApiDocument['paths'] = {};
  const usedIds = new Set<string>();
  const tags: string[] = [];
  for (const route of routes) {
    let operationId = operationIdOf(route.method, route.path);
    for (let n = 2; usedIds.has(operationId); n++) operationId = `${operationIdOf(route.method, route.path)}${n}`;
    usedIds.add(operationId);
    const operation = operationOf(route, operationId, components.schemas);
    const tag = tagOf(route.path);
    if (!tags.includes(tag)) tags.push(tag);
    const item = (paths[openApiPath(route.path)] ??= {});
    item[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: 'Run Tasks Service API',
      version: API_VERSION,
      description:
        'An HCP Terraform-compatible Run Tasks API (JSON:API). Request bodies are described by the same schemas that validate them.',
    },
    servers: [{ url: serverUrl.replace(/\/+$/, '') + API_PREFIX }],
    tags: tags.map((name) => ({ name })),
    paths,
    components,
  };
}
