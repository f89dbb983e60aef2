import { expect } from '@jest/globals';
import { JSON_API, type api } from './fixtures.ts';

export { uniqueName } from './fixtures.ts';

/** The whole body of every 404: a missing resource and one the caller may not see answer alike. */
export const NOT_FOUND = { errors: [{ status: '404', title: 'not found' }] };

/** The whole body of every 401. */
export const UNAUTHORIZED = { errors: [{ status: '401', title: 'unauthorized' }] };

/** A response as `api` (supertest) resolves it. */
export type Response = Awaited<ReturnType<typeof api>>;

/** One entry of a JSON:API `errors` array. */
export interface ApiError {
  status: string;
  title: string;
  detail?: string;
  source?: { pointer?: string; parameter?: string; header?: string };
  meta?: Record<string, unknown>;
}

/** Asserts a JSON:API error document with one error of `status` and, when given, its pointer; returns that error. */
export function expectError(res: Response, status: number, pointer?: string): ApiError {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toContain(JSON_API);
  expect(res.body.errors).toHaveLength(1);
  expect(res.body.errors[0].status).toBe(String(status));
  expect(typeof res.body.errors[0].title).toBe('string');
  if (pointer !== undefined) expect(res.body.errors[0].source).toEqual({ pointer });
  return res.body.errors[0] as ApiError;
}

/** Asserts a 404 whose body is exactly NOT_FOUND. */
export function expectNotFound(res: Response): void {
  expect(res.status).toBe(404);
  expect(res.body).toEqual(NOT_FOUND);
}

/** The ids of a collection document's resources, in the order given. */
export const idsOf = (res: Response): string[] => (res.body.data as { id: string }[]).map((resource) => resource.id);
