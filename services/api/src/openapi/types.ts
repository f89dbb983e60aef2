import type { RouteDef } from '../routes/define.ts';

/** The shapes of the OpenAPI 3.1 document, as far as this service writes them. */
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

export const ref = (section: string, name: string): JsonSchema => ({ $ref: `#/components/${section}/${name}` });

/** What a components key may hold: anything else (from an operation id or a `$defs` name) becomes `_`. */
export const COMPONENT_NAME = /[^A-Za-z0-9._-]/g;
