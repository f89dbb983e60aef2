import { afterEach, describe, expect, it } from '@jest/globals';
import type { lookup, LookupAddress } from 'node:dns';
import { createHmac } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MockAgent } from 'undici';
import { eventually } from '../../../test/support/fixtures.ts';
import { freePort } from '../../../test/support/processes.ts';
import { encodePayload, verificationPayload } from './payload.ts';
import {
  createTaskClient,
  describeOutcome,
  RESPONSE_BODY_LIMIT,
  USER_AGENT,
  type DeliveryErrorKind,
  type DeliveryOutcome,
  type TaskClient,
} from './task-client.ts';

const ORIGIN = 'http://tasks.example.test';
const BODY = encodePayload(verificationPayload('https://runtasks.example.test', 'acme', new Date('2026-01-02T03:04:05.678Z')));

function mockAgent(): MockAgent {
  const agent = new MockAgent({ enableCallHistory: true });
  agent.disableNetConnect();
  return agent;
}

const callsOf = (agent: MockAgent) => agent.getCallHistory()?.calls() ?? [];

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function clientWith(options: Parameters<typeof createTaskClient>[0]): TaskClient {
  const client = createTaskClient(options);
  cleanups.push(() => client.close());
  return client;
}

/** A real loopback server; `handler` decides what each request gets. Counts connections. */
async function realServer(handler: (res: ServerResponse, path: string) => void): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(res, req.url ?? ''));
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as AddressInfo).port, connections: () => connections };
}

function expectError(outcome: DeliveryOutcome, errorKind: DeliveryErrorKind): void {
  expect(outcome).toMatchObject({ kind: 'error', errorKind });
  expect(outcome.durationMs).toBeGreaterThanOrEqual(0);
}

describe('createTaskClient.post (undici MockAgent)', () => {
  it('POSTs the exact body with JSON content type, user agent and an HMAC-SHA512 signature', async () => {
    const agent = mockAgent();
    agent.get(ORIGIN).intercept({ path: '/hooks/task?x=1', method: 'POST' }).reply(200, 'ok');
    const client = clientWith({ allowlist: [], dispatcher: agent });

    const outcome = await client.post(`${ORIGIN}/hooks/task?x=1`, BODY, 'secret-key');
    expect(outcome).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'ok' });

    const calls = callsOf(agent);
    expect(calls).toHaveLength(1);
    const [call] = calls;
    expect(call?.method).toBe('POST');
    const sent = call?.body as unknown as Buffer;
    expect(Buffer.isBuffer(sent)).toBe(true);
    expect(sent.equals(BODY)).toBe(true);
    expect(call?.headers).toEqual({
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'x-tfc-task-signature': createHmac('sha512', 'secret-key').update(BODY).digest('hex'),
    });
    expect(USER_AGENT).toMatch(/\S/);
  });

  it('sends an empty signature header when there is no key', async () => {
    const agent = mockAgent();
    agent.get(ORIGIN).intercept({ path: '/hook', method: 'POST' }).reply(200, '').times(2);
    const client = clientWith({ allowlist: [], dispatcher: agent });
    await client.post(`${ORIGIN}/hook`, BODY, null);
    await client.post(`${ORIGIN}/hook`, BODY, '');
    const calls = callsOf(agent);
    expect(calls).toHaveLength(2);
    for (const call of calls) expect(call.headers).toHaveProperty('x-tfc-task-signature', '');
  });

  it('returns a 302 as a response and does not follow it', async () => {
    const agent = mockAgent();
    const pool = agent.get(ORIGIN);
    pool.intercept({ path: '/hook', method: 'POST' }).reply(302, 'moved', { headers: { location: `${ORIGIN}/elsewhere` } });
    pool.intercept({ path: '/elsewhere', method: 'POST' }).reply(200, 'followed');
    const client = clientWith({ allowlist: [], dispatcher: agent });

    const outcome = await client.post(`${ORIGIN}/hook`, BODY, 'k');
    expect(outcome).toMatchObject({ kind: 'response', status: 302, bodyExcerpt: 'moved' });
    expect(callsOf(agent).map((call) => call.path)).toEqual(['/hook']);
    expect(agent.pendingInterceptors().map((interceptor) => interceptor.path)).toEqual(['/elsewhere']);
  });

  it('reports what Retry-After asked for on an answer that is not 200, and nothing on a 200 or without the header', async () => {
    const agent = mockAgent();
    const pool = agent.get(ORIGIN);
    pool.intercept({ path: '/busy', method: 'POST' }).reply(503, 'busy', { headers: { 'retry-after': '7' } });
    pool.intercept({ path: '/throttled', method: 'POST' }).reply(429, '', { headers: { 'retry-after': 'Fri, 01 Jan 2100 00:00:00 GMT' } });
    pool.intercept({ path: '/odd', method: 'POST' }).reply(503, '', { headers: { 'retry-after': 'later' } });
    pool.intercept({ path: '/plain', method: 'POST' }).reply(500, '');
    pool.intercept({ path: '/ok', method: 'POST' }).reply(200, '', { headers: { 'retry-after': '7' } });
    const client = clientWith({ allowlist: [], dispatcher: agent });

    expect(await client.post(`${ORIGIN}/busy`, BODY, null)).toMatchObject({ kind: 'response', status: 503, retryAfterMs: 7_000 });
    const throttled = await client.post(`${ORIGIN}/throttled`, BODY, null);
    expect(throttled.kind === 'response' && throttled.retryAfterMs).toBeGreaterThan(365 * 24 * 3600 * 1000);
    for (const path of ['/odd', '/plain', '/ok']) {
      const outcome = await client.post(`${ORIGIN}${path}`, BODY, null);
      expect({ path, kind: outcome.kind, hasRetryAfter: 'retryAfterMs' in outcome }).toEqual({
        path,
        kind: 'response',
        hasRetryAfter: false,
      });
    }
  });

  it('caps the response body excerpt at RESPONSE_BODY_LIMIT bytes', async () => {
    const agent = mockAgent();
    agent
      .get(ORIGIN)
      .intercept({ path: '/big', method: 'POST' })
      .reply(500, 'x'.repeat(RESPONSE_BODY_LIMIT * 3 + 17));
    agent.get(ORIGIN).intercept({ path: '/exact', method: 'POST' }).reply(200, 'y'.repeat(RESPONSE_BODY_LIMIT));
    const client = clientWith({ allowlist: [], dispatcher: agent });

    const big = await client.post(`${ORIGIN}/big`, BODY, null);
    expect(big.kind).toBe('response');
    expect(big.kind === 'response' && big.bodyExcerpt).toBe('x'.repeat(RESPONSE_BODY_LIMIT));
    const exact = await client.post(`${ORIGIN}/exact`, BODY, null);
    expect(exact.kind === 'response' && exact.bodyExcerpt.length).toBe(RESPONSE_BODY_LIMIT);
  });

  it('refuses a blocked literal before any request is made', async () => {
    const agent = mockAgent();
    agent.get('http://127.0.0.1').intercept({ path: '/hook', method: 'POST' }).reply(200, 'should not be reached');
    agent.get('http://[::ffff:7f00:1]').intercept({ path: '/hook', method: 'POST' }).reply(200, 'should not be reached');
    const client = clientWith({ allowlist: [], dispatcher: agent });

    for (const url of ['http://127.0.0.1/hook', 'http://2130706433/hook', 'http://[::ffff:127.0.0.1]/hook', 'http://169.254.169.254/']) {
      const outcome = await client.post(url, BODY, 'k');
      expectError(outcome, 'blocked');
      expect(outcome.kind === 'error' && outcome.message).toContain('is not allowed');
    }
    expect(callsOf(agent)).toHaveLength(0);
  });

  it('lets allowlisted and public literals through', async () => {
    const agent = mockAgent();
    agent.get('http://127.0.0.1').intercept({ path: '/hook', method: 'POST' }).reply(200, 'local');
    agent.get('http://93.184.216.34').intercept({ path: '/hook', method: 'POST' }).reply(200, 'public');
    const client = clientWith({ allowlist: ['127.0.0.1/32'], dispatcher: agent });
    expect(await client.post('http://127.0.0.1/hook', BODY, null)).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'local' });
    expect(await client.post('http://93.184.216.34/hook', BODY, null)).toMatchObject({ kind: 'response', bodyExcerpt: 'public' });
    expect(callsOf(agent)).toHaveLength(2);
  });

  it.each(['ftp://tasks.example.test/hook', 'not a url', 'file:///etc/passwd', 'javascript:alert(1)'])(
    'answers invalid_url for %j without a request',
    async (url) => {
      const agent = mockAgent();
      const client = clientWith({ allowlist: [], dispatcher: agent });
      expectError(await client.post(url, BODY, null), 'invalid_url');
      expect(callsOf(agent)).toHaveLength(0);
    },
  );

  it.each<[string, string | undefined, DeliveryErrorKind]>([
    ['ECONNREFUSED', undefined, 'refused'],
    ['ENOTFOUND', undefined, 'dns'],
    ['EAI_AGAIN', undefined, 'dns'],
    ['ETIMEDOUT', undefined, 'timeout'],
    ['UND_ERR_CONNECT_TIMEOUT', undefined, 'timeout'],
    ['UND_ERR_HEADERS_TIMEOUT', undefined, 'timeout'],
    ['ECONNRESET', undefined, 'reset'],
    ['UND_ERR_SOCKET', undefined, 'reset'],
    ['CERT_HAS_EXPIRED', undefined, 'tls'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', undefined, 'tls'],
    ['EBLOCKEDDESTINATION', undefined, 'blocked'],
    ['UND_ERR_CONNECT', 'ECONNREFUSED', 'refused'],
    ['EWHATEVER', undefined, 'other'],
  ])('classifies an error with code %s (cause %s) as %s', async (code, causeCode, kind) => {
    const agent = mockAgent();
    const error = Object.assign(new Error(`failed: ${code}`), { code }, causeCode ? { cause: { code: causeCode } } : {});
    agent.get(ORIGIN).intercept({ path: '/hook', method: 'POST' }).replyWithError(error);
    const client = clientWith({ allowlist: [], dispatcher: agent });
    const outcome = await client.post(`${ORIGIN}/hook`, BODY, null);
    expectError(outcome, kind);
    expect(outcome.kind === 'error' && outcome.message).toBe(`failed: ${code}`);
  });

  it('leaves an injected dispatcher open on close', async () => {
    const agent = mockAgent();
    agent.get(ORIGIN).intercept({ path: '/hook', method: 'POST' }).reply(200, 'still open').times(2);
    const first = createTaskClient({ allowlist: [], dispatcher: agent });
    await first.close();
    const second = clientWith({ allowlist: [], dispatcher: agent });
    expect(await second.post(`${ORIGIN}/hook`, BODY, null)).toMatchObject({ kind: 'response', bodyExcerpt: 'still open' });
  });
});

describe('createTaskClient.post (real loopback sockets)', () => {
  it('classifies a refused connection', async () => {
    const client = clientWith({ allowlist: ['127.0.0.1/32'] });
    const outcome = await client.post(`http://127.0.0.1:${await freePort()}/hook`, BODY, null);
    expectError(outcome, 'refused');
    expect(describeOutcome(outcome)).toBe('the connection was refused');
  });

  it('classifies a server that never answers as a timeout (headers timeout and abort signal)', async () => {
    const server = await realServer(() => undefined);
    const client = clientWith({ allowlist: ['127.0.0.1/32'], headersTimeoutMs: 100 });
    expectError(await client.post(`http://127.0.0.1:${server.port}/hang`, BODY, null), 'timeout');

    const patient = clientWith({ allowlist: ['127.0.0.1/32'], headersTimeoutMs: 60_000 });
    const started = performance.now();
    const aborted = await patient.post(`http://127.0.0.1:${server.port}/hang`, BODY, null, AbortSignal.timeout(100));
    expectError(aborted, 'timeout');
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(describeOutcome(aborted)).toBe('the endpoint did not answer in time');
  });

  it('classifies a body that stalls after the headers as a timeout', async () => {
    const server = await realServer((res) => {
      res.writeHead(200);
      res.write('partial');
    });
    const client = clientWith({ allowlist: ['127.0.0.1/32'], bodyTimeoutMs: 100 });
    expectError(await client.post(`http://127.0.0.1:${server.port}/stall`, BODY, null), 'timeout');
  });

  it('stops reading an endless response body at RESPONSE_BODY_LIMIT', async () => {
    let closed = false;
    let written = 0;
    const server = await realServer((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.on('close', () => {
        closed = true;
      });
      const pump = (): void => {
        if (res.destroyed) return;
        written += 8 * 1024;
        if (res.write(Buffer.alloc(8 * 1024, 'z'))) setImmediate(pump);
        else res.once('drain', pump);
      };
      pump();
    });
    const client = clientWith({ allowlist: ['127.0.0.1/32'] });
    const outcome = await client.post(`http://127.0.0.1:${server.port}/endless`, BODY, null);
    expect(outcome).toMatchObject({ kind: 'response', status: 200 });
    expect(outcome.kind === 'response' && outcome.bodyExcerpt).toBe('z'.repeat(RESPONSE_BODY_LIMIT));
    // The client hung up instead of draining the rest of the stream.
    expect(await eventually(async () => (closed ? closed : undefined), 5_000)).toBe(true);
    // …soon after the limit, not after buffering megabytes (socket buffers hold a little more than the limit).
    expect(written).toBeLessThan(64 * RESPONSE_BODY_LIMIT);
  });

  it('refuses a host name that resolves to loopback without connecting (guarded lookup)', async () => {
    const server = await realServer((res) => res.end('reached'));
    const client = clientWith({ allowlist: [] });
    for (const host of [`localhost:${server.port}`, `127.0.0.1:${server.port}`]) {
      const outcome = await client.post(`http://${host}/hook`, BODY, null);
      expectError(outcome, 'blocked');
      expect(describeOutcome(outcome)).toContain('TASK_DESTINATION_ALLOWLIST');
    }
    expect(server.connections()).toBe(0);

    const allowed = clientWith({ allowlist: ['localhost'] });
    expect(await allowed.post(`http://localhost:${server.port}/hook`, BODY, null)).toMatchObject({
      kind: 'response',
      status: 200,
      bodyExcerpt: 'reached',
    });
    expect(server.connections()).toBe(1);
  });
});

describe('createTaskClient.post with chosen DNS answers (real loopback sockets)', () => {
  /** A resolver for every name: `addresses`, whatever is asked. */
  const answering = (addresses: LookupAddress[]) =>
    ((_hostname: string, _options: unknown, callback: (error: null, addresses: LookupAddress[]) => void) =>
      callback(null, addresses)) as unknown as typeof lookup;

  it('connects to the address the guard checked (the name resolves nowhere else)', async () => {
    const server = await realServer((res) => res.end('pinned'));
    const client = clientWith({ allowlist: ['127.0.0.1/32'], resolve: answering([{ address: '127.0.0.1', family: 4 }]) });
    const outcome = await client.post(`http://task.example.test:${server.port}/hook`, BODY, null);
    expect(outcome).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'pinned' });
    expect(server.connections()).toBe(1);
  });

  it.each<[string, LookupAddress[]]>([
    [
      'allowed first, forbidden last',
      [
        { address: '127.0.0.1', family: 4 },
        { address: '10.1.2.3', family: 4 },
      ],
    ],
    [
      'forbidden first, allowed last',
      [
        { address: '169.254.169.254', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ],
    ],
  ])('refuses a mixed answer (%s) without connecting anywhere', async (_label, addresses) => {
    const server = await realServer((res) => res.end('reached'));
    const client = clientWith({ allowlist: ['127.0.0.1/32'], resolve: answering(addresses) });
    expectError(await client.post(`http://mixed.example.test:${server.port}/hook`, BODY, null), 'blocked');
    expect(server.connections()).toBe(0);
  });
});

describe('describeOutcome', () => {
  it.each([200, 202, 302, 500])('says what status %i the endpoint answered', (status) => {
    expect(describeOutcome({ kind: 'response', status, bodyExcerpt: '', durationMs: 1 })).toBe(`the endpoint answered HTTP ${status}`);
  });

  it.each<[DeliveryErrorKind, string]>([
    [
      'blocked',
      'the destination is not allowed (a private, loopback or reserved address); operators can allow it with TASK_DESTINATION_ALLOWLIST',
    ],
    ['dns', 'the host name could not be resolved'],
    ['refused', 'the connection was refused'],
    ['timeout', 'the endpoint did not answer in time'],
    ['tls', 'the TLS handshake failed'],
    ['reset', 'the connection was reset'],
    ['invalid_url', 'the URL is not a valid http(s) URL'],
    ['other', 'the request failed'],
  ])('describes a %s error', (errorKind, sentence) => {
    expect(describeOutcome({ kind: 'error', errorKind, message: 'x', durationMs: 1 })).toBe(sentence);
  });
});
