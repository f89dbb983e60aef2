import { API_PREFIX } from '../http/jsonapi.ts';
import type { RouteDef } from '../routes/define.ts';
import { baseComponents } from './components.ts';
import { openApiPath, operationIdOf, operationOf, tagOf } from './operations.ts';
import type { OpenApiDocument } from './types.ts';

/**
 * The OpenAPI 3.1 document, generated from the route table: every route, and for every body the
 * JSON Schema of the very zod schema that validates it (input side), so the two cannot drift.
 * The parts: `types.ts`, `json-schema.ts` (zod → JSON Schema), `operations.ts` (route → operation),
 * `components.ts` (the shared envelope and errors).
 */

export type { JsonSchema, OpenApiDocument, OperationObject } from './types.ts';
export { operationIdOf, tagOf } from './operations.ts';

/** services/api/package.json's version (the unit test keeps them equal). */
export const API_VERSION = '0.1.0';
export const OPENAPI_VERSION = '3.1.1';

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
