import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '../src/client.ts';
import { type CliError, EXIT } from '../src/exit-codes.ts';

/** The HTTP client against a real local server that answers as scripted per path. */
describe('the HTTP client', () => {
  let server: Server;
  let address: string;
  const seen: { method: string; path: string; authorization: string | undefined; type: string | undefined; body: string }[] = [];
  const script = new Map<string, Array<(res: ServerResponse) => void>>();
  const json =
    (status: number, body: unknown, headers: Record<string, string> = {}) =>
    (res: ServerResponse) =>
      res.writeHead(status, { 'content-type': 'application/vnd.api+json', ...headers }).end(JSON.stringify(body));

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const path = req.url ?? '';
        seen.push({ method: req.method ?? '', path, authorization: req.headers.authorization, type: req.headers['content-type'], body });
        const next = script.get(`${req.method} ${path}`)?.shift();
        if (next) next(res);
        else res.writeHead(500).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    address = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const failure = (promise: Promise<unknown>): Promise<CliError> =>
    promise.then(
      () => {
        throw new Error('expected a failure');
      },
      (error: unknown) => error as CliError,
    );

  it('sends the token and JSON:API, and retries a 429 after its Retry-After', async () => {
    script.set('GET /api/v2/runs/run-1', [
      json(429, { errors: [{ status: '429', title: 'too many requests' }] }, { 'retry-after': '1' }),
      json(200, { data: { id: 'run-1' } }),
    ]);
    const client = new Client(address, 'tok');
    const started = Date.now();
    await expect(client.request('GET', '/runs/run-1')).resolves.toEqual({ data: { id: 'run-1' } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    const calls = seen.filter((call) => call.path === '/api/v2/runs/run-1');
    expect(calls).toHaveLength(2);
    expect(calls[0]?.authorization).toBe('Bearer tok');
  });

  it('never repeats a POST that got a 503: exit 4 at once', async () => {
    script.set('POST /api/v2/runs', [
      json(503, { errors: [{ status: '503', title: 'service unavailable', detail: 'retry shortly' }] }, { 'retry-after': '1' }),
    ]);
    const error = await failure(new Client(address, 'tok').request('POST', '/runs', { body: { jsonApi: { data: {} } } }));
    expect({ code: error.code, message: error.message }).toEqual({
      code: EXIT.network,
      message: 'POST /api/v2/runs answered 503: service unavailable: retry shortly',
    });
    expect(seen.filter((call) => call.method === 'POST' && call.path === '/api/v2/runs')).toHaveLength(1);
  });

  it.each([
    [401, undefined, EXIT.auth, /refused the token \(401\)/],
    [404, 'unknown run run-2 (or the token cannot see its workspace)', EXIT.refused, /^unknown run run-2/],
    [409, undefined, EXIT.refused, /answered 409: transition not allowed: no/],
  ])('maps a %i to its exit code and one line', async (status, notFound, code, message) => {
    script.set('GET /api/v2/runs/run-2', [
      json(status, { errors: [{ status: String(status), title: status === 409 ? 'transition not allowed' : 'x', detail: 'no' }] }),
    ]);
    const error = await failure(new Client(address, 'tok').request('GET', '/runs/run-2', notFound ? { notFound } : {}));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('sends raw bodies with their content type, without the token to an upload URL', async () => {
    script.set('PUT /upload/abc', [(res) => res.writeHead(200).end()]);
    await new Client(address, 'tok').request('PUT', `${address}/upload/abc`, {
      anonymous: true,
      body: { raw: Buffer.from('archive'), contentType: 'application/octet-stream' },
    });
    expect(seen.at(-1)).toMatchObject({ authorization: undefined, type: 'application/octet-stream', body: 'archive' });
  });

  it('tells a server that is not the service from one that is', async () => {
    script.set('GET /api/v2/ping', [
      (res) => res.writeHead(204, { 'tfp-api-version': '2.6', 'x-runtasks-version': '1.2.3' }).end(),
      (res) => res.writeHead(204, { 'tfp-api-version': '2.6' }).end(),
      (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>'),
    ]);
    const client = new Client(address, 'tok');
    await expect(client.ping()).resolves.toEqual({ version: '1.2.3' });
    // HCP Terraform answers /ping too, without this service's header.
    await expect(client.ping()).resolves.toEqual({ version: undefined });
    const error = await failure(client.ping());
    expect({ code: error.code, message: error.message }).toEqual({
      code: EXIT.network,
      message: `${address} does not look like the Run Tasks service (GET /api/v2/ping answered 200): check RUNTASKS_ADDRESS`,
    });
  });

  it('says so when an answer is not JSON', async () => {
    script.set('GET /api/v2/runs/run-3', [(res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>')]);
    const error = await failure(new Client(address, 'tok').request('GET', '/runs/run-3'));
    expect(error.code).toBe(EXIT.network);
    expect(error.message).toMatch(/answered something that is not JSON/);
  });
});
