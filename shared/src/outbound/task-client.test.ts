import { describe, expect, it } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { createTaskClient, describeOutcome, RESPONSE_BODY_LIMIT, USER_AGENT, type DeliveryErrorKind } from './task-client.ts';
import { ORIGIN, BODY, mockAgent, callsOf, clientWith, expectError } from './task-client.fixtures.ts';

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
