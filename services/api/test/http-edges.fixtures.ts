// What the HTTP edge tests share: the seeded organization and checks of error documents and links.
import { expect } from '@jest/globals';
import { request as httpRequest } from 'node:http';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { createOrganization, createOrganizationToken, createRun, createWorkspace } from '../../../test/support/fixtures.ts';
import { expectError, type ApiError, type Response } from '../../../test/support/assertions.ts';

export const PUBLIC_BASE_URL = 'http://runtasks.test';
export const ORG = 'edges';
export const WORKSPACES = 45;
export const wsName = (index: number): string => `edge-ws-${String(index).padStart(2, '0')}`;
export const MiB = 1024 * 1024;

/**
 * Every error: a JSON:API document with the status as a string, a request id, and nothing internal.
 * On top of expectError: the body in the message of a wrong status, the exact media type, the request
 * id, no internals in the text, and no top-level member but `errors`.
 */
export function expectErrorDocument(res: Response, status: number): ApiError {
  expect({ status: res.status, text: res.text }).toEqual({ status, text: expect.any(String) });
  expect(res.headers['content-type']).toMatch(/^application\/vnd\.api\+json(;|$)/);
  expect(res.headers['x-request-id']).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
  expect(res.text).not.toMatch(/\bat .+:\d+:\d+|\n\s+at |\/work\/|node_modules|\.ts\b|\.js\b|Error:/);
  expect(Object.keys(JSON.parse(res.text) as object)).toEqual(['errors']);
  return expectError(res, status);
}

/** A pagination link: absolute on PUBLIC_BASE_URL, on `path`, for page `number` of `size`, with `extra` kept. */
export function expectLink(link: unknown, path: string, number: number, size: number, extra: Record<string, string> = {}): void {
  expect(typeof link).toBe('string');
  const url = new URL(link as string);
  expect(`${url.origin}${url.pathname}`).toBe(`${PUBLIC_BASE_URL}/api/v2${path}`);
  const params = [...url.searchParams.entries()].sort(([a], [b]) => a.localeCompare(b));
  const expected = Object.entries({ ...extra, 'page[number]': String(number), 'page[size]': String(size) }).sort(([a], [b]) =>
    a.localeCompare(b),
  );
  expect(params).toEqual(expected);
}

export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** A request with full control over framing (chunked bodies, no Content-Type). */
export function raw(h: Harness, method: string, path: string, headers: Record<string, string>, chunks: Buffer[]): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, h.baseUrl);
    const req = httpRequest(url, { method, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(parts).toString('utf8') }));
      res.on('error', reject);
    });
    // The server may answer (413) before the whole body is written; that is the point, not an error.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}
/** The organization the edge tests read: WORKSPACES workspaces, two runs in the first, two more organizations. */
export async function startEdges(): Promise<{ h: Harness; token: string; workspaceId: string; runIds: string[] }> {
  const h = await startHarness();
  await createOrganization(h, ORG);
  const token = await createOrganizationToken(h, ORG);
  let workspaceId = '';
  for (let index = 0; index < WORKSPACES; index += 1) {
    const id = await createWorkspace(h, ORG, token, wsName(index));
    if (index === 0) workspaceId = id;
  }
  await createOrganization(h, `${ORG}-two`);
  await createOrganization(h, `${ORG}-three`);
  const runIds = [
    await createRun(h, token, workspaceId, { message: 'first' }),
    await createRun(h, token, workspaceId, { message: 'second' }),
  ];
  return { h, token, workspaceId, runIds };
}
