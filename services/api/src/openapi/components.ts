import { MEDIA_TYPE } from '../http/jsonapi.ts';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../http/pagination.ts';
import { ref, type JsonSchema, type OpenApiDocument } from './types.ts';

// The components every operation refers to: declarative data, the JSON:API envelope and its errors.

const errorResponse = (description: string, headers?: JsonSchema): JsonSchema => ({
  description,
  ...(headers ? { headers } : {}),
  content: { [MEDIA_TYPE]: { schema: ref('schemas', 'Errors') } },
});

const nullableString = { type: ['string', 'null'] };

const COMPONENTS: OpenApiDocument['components'] = {
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
            header: { type: 'string', description: 'The offending request header.' },
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
    Forbidden: errorResponse('The token may read the resource but lacks the permission this takes; the detail names it'),
    NotFound: errorResponse('Not found, or not visible to this token (the two are indistinguishable)'),
    MethodNotAllowed: errorResponse('The path does not accept this method'),
    Conflict: errorResponse('The transition is not allowed in the current state, or a concurrent change won'),
    PayloadTooLarge: errorResponse('The body exceeds the limit'),
    UnsupportedMediaType: errorResponse('The Content-Type is not application/vnd.api+json or application/json'),
    UnprocessableEntity: errorResponse('An invalid or missing attribute or query parameter (see source.pointer / source.parameter)'),
    TooManyRequests: errorResponse('Rate limited', { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } }),
  },
};

/** A fresh copy per document: building one adds each operation's request schema to `schemas`. */
export const baseComponents = (): OpenApiDocument['components'] => structuredClone(COMPONENTS);
