import { JSON_BODY_LIMIT } from '../http/body.ts';
import { MEDIA_TYPE } from '../http/jsonapi.ts';
import type { HttpMethod, RouteDef } from '../routes/define.ts';
import { acceptsNoBody, convert, register, type Converted } from './json-schema.ts';
import { COMPONENT_NAME, ref, type JsonSchema, type OperationObject } from './types.ts';

// Routes → operations: one OpenAPI operation per route of the route table.

const JSON_TYPES = [MEDIA_TYPE, 'application/json'] as const;

export const pathParams = (path: string): string[] => [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((match) => match[1] as string);
export const openApiPath = (path: string): string => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
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
  // The organization's audit trail token or an owner's token: a bearer token either way.
  'audit-trail': [{ bearerAuth: [] }],
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
  if (route.auth === 'token' && route.method !== 'GET') responses['403'] = ref('responses', 'Forbidden');
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
  for (const header of route.headers ?? [])
    parameters.push({ name: header.name, in: 'header', required: false, description: header.description, schema: { type: 'string' } });
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

export function operationOf(route: RouteDef, operationId: string, schemas: Record<string, JsonSchema>): OperationObject {
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
