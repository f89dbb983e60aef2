import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { API_TOKEN_PREFIX, CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import Koa from 'koa';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import request from 'supertest';
import { eventually } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { buildApp } from '../src/app.ts';
import { PIPELINE_TOKEN_PREFIX } from '../src/ci/pipeline-tokens.ts';

/**
 * An address past its failed authentications is answered the failure limit's 429 before Koa's chain
 * (http/early-refusal.ts) where the chain would answer it from `authenticate`: the same status, headers
 * and body, for a fraction of the work. Everything else goes through the chain as before. Run with the
 * defaults a user has (compression, rate limits, the principal cache), the failure limit lowered.
 */

const LIMIT = 3;
/** Headers that differ between any two answers whoever makes them. */
const PER_ANSWER = new Set(['date', 'x-request-id', 'connection', 'keep-alive']);

interface Sent {
  method: 'get' | 'post' | 'head' | 'delete' | 'patch';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

async function answer(listener: RequestListener, sent: Sent) {
  let req = request(listener)[sent.method](sent.path);
  for (const [name, value] of Object.entries(sent.headers)) req = req.set(name, value);
  const res = await (sent.body === undefined ? req : req.send(sent.body));
  const headers = Object.fromEntries(Object.entries(res.headers).filter(([name]) => !PER_ANSWER.has(name)));
  return { status: res.status, headers, text: res.text ?? '', requestId: res.headers['x-request-id'] as string | undefined };
}

describe('the early refusal of an address past its failed authentications', () => {
  let h: Harness;
  let app: ReturnType<typeof buildApp>;
  /** The app as the server runs it, counting the answers made before the chain. */
  let served: RequestListener;
  /** The same app with Koa's own listener: every request through the chain. */
  let chainOnly: RequestListener;
  let early = 0;

  const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });
  const JSON_API = { 'Content-Type': 'application/vnd.api+json' };

  beforeAll(async () => {
    h = await startHarness({ ops: true, env: { AUTH_FAILURES_PER_MINUTE: String(LIMIT) } });
    app = buildApp({ config: h.config, orm: h.orm, secrets: h.secrets, logger: h.logger, taskClient: h.taskClient, ops: h.ops?.ops });
    const answerEarly = app.earlyRefusal;
    if (!answerEarly) throw new Error('the app has no early refusal');
    app.earlyRefusal = (req: IncomingMessage, res: ServerResponse) => {
      const answered = answerEarly(req, res);
      if (answered) early += 1;
      return answered;
    };
    served = app.callback() as RequestListener;
    chainOnly = Koa.prototype.callback.call(app) as RequestListener;
    await eventually(async () => (h.ops?.ops.principalCache?.trusted ? true : undefined), 10_000, 20);
    // The admin token, active, known before the address is refused.
    expect((await answer(served, { method: 'get', path: '/api/v2/organizations', headers: bearer(h.adminToken) })).status).toBe(200);
    for (let index = 0; index < LIMIT; index += 1) {
      const spent = await answer(served, {
        method: 'get',
        path: '/api/v2/organizations',
        headers: bearer(generateToken(API_TOKEN_PREFIX)),
      });
      expect(spent.status).toBe(401);
    }
    expect(early).toBe(0);
  });
  afterAll(async () => {
    await h?.close();
  });

  const refusedEarly: [string, Sent][] = [
    ['a list with a random token', { method: 'get', path: '/api/v2/organizations', headers: bearer(generateToken(API_TOKEN_PREFIX)) }],
    [
      'a write with a body',
      {
        method: 'post',
        path: '/api/v2/organizations',
        headers: { ...bearer(generateToken(API_TOKEN_PREFIX)), ...JSON_API },
        body: '{"data":{"type":"organizations","attributes":{"name":"never-made","email":"x@example.com"}}}',
      },
    ],
    ['a HEAD', { method: 'head', path: '/api/v2/organizations', headers: bearer(generateToken(API_TOKEN_PREFIX)) }],
    [
      'a path with ids',
      { method: 'get', path: '/api/v2/workspaces/ws-0123456789abcdef', headers: bearer(generateToken(API_TOKEN_PREFIX)) },
    ],
    ['a path in another case', { method: 'get', path: '/api/v2/Organizations', headers: bearer(generateToken(API_TOKEN_PREFIX)) }],
    ['a pipeline token', { method: 'get', path: '/api/v2/organizations', headers: bearer(generateToken(PIPELINE_TOKEN_PREFIX)) }],
    [
      "a client's request id, compression asked",
      {
        method: 'get',
        path: '/api/v2/organizations?page%5Bsize%5D=5',
        headers: { ...bearer(generateToken(API_TOKEN_PREFIX)), 'X-Request-Id': 'client-chosen.id_1', 'Accept-Encoding': 'gzip, br' },
      },
    ],
  ];

  it.each(refusedEarly)('answers %s before the chain, as the chain does', async (_name, sent) => {
    const before = early;
    const made = await answer(served, sent);
    expect(early).toBe(before + 1);
    const chain = await answer(chainOnly, sent);
    expect(early).toBe(before + 1);
    expect(made.status).toBe(429);
    expect(made.headers['retry-after']).toMatch(/^\d+$/);
    // Retry-After counts down: the chain's answer came a moment later.
    expect(Math.abs(Number(made.headers['retry-after']) - Number(chain.headers['retry-after']))).toBeLessThanOrEqual(1);
    const sameSecond = (headers: Record<string, unknown>) => ({ ...headers, 'retry-after': 'n' });
    const sameDetail = (text: string) => text.replace(/retry after \d+ s/, 'retry after n s');
    expect({ ...made, headers: sameSecond(made.headers), text: sameDetail(made.text), requestId: undefined }).toEqual({
      ...chain,
      headers: sameSecond(chain.headers),
      text: sameDetail(chain.text),
      requestId: undefined,
    });
    if (sent.headers['X-Request-Id']) expect(made.requestId).toBe(sent.headers['X-Request-Id']);
    else expect(made.requestId).toMatch(/^[0-9a-f-]{36}$/);
  });

  const leftToTheChain: [string, Sent, number][] = [
    ['the active admin token', { method: 'get', path: '/api/v2/organizations', headers: bearer('ADMIN') }, 200],
    ['no token', { method: 'get', path: '/api/v2/organizations', headers: {} }, 401],
    ['a token of no plausible shape', { method: 'get', path: '/api/v2/organizations', headers: bearer('short') }, 401],
    ['a public route', { method: 'get', path: '/api/v2/ping', headers: bearer(generateToken(API_TOKEN_PREFIX)) }, 204],
    ['a path no route has', { method: 'get', path: '/api/v2/no-such-thing', headers: bearer(generateToken(API_TOKEN_PREFIX)) }, 404],
    ['a method the path lacks', { method: 'delete', path: '/api/v2/organizations', headers: bearer(generateToken(API_TOKEN_PREFIX)) }, 405],
    ['outside the API', { method: 'get', path: '/healthz', headers: bearer(generateToken(API_TOKEN_PREFIX)) }, 200],
    [
      // The callback's own authentication (derived and stored task tokens) refuses it, in the chain.
      'the callback route',
      {
        method: 'patch',
        path: '/api/v2/task-results/taskrs-0123456789abcdef/callback',
        headers: { ...bearer(generateToken(CALLBACK_TOKEN_PREFIX)), ...JSON_API },
        body: '{}',
      },
      429,
    ],
  ];

  it.each(leftToTheChain)('leaves %s to the chain', async (_name, sent, status) => {
    const headers = sent.headers['Authorization'] === 'Bearer ADMIN' ? bearer(h.adminToken) : sent.headers;
    const before = early;
    const made = await answer(served, { ...sent, headers });
    expect(early).toBe(before);
    expect(made.status).toBe(status);
  });

  it('counts its answers in the request metrics under the route, as the chain does', async () => {
    const metrics = h.ops?.ops.metrics;
    const count = async () => {
      const text = (await metrics?.registry.getSingleMetricAsString('http_request_duration_seconds')) ?? '';
      const line = text.split('\n').find((row) => /_count\{.*route="\/api\/v2\/organizations".*status="429"/.test(row));
      return Number(line?.split(' ').pop() ?? 0);
    };
    const before = await count();
    const earlyBefore = early;
    await answer(served, { method: 'get', path: '/api/v2/organizations', headers: bearer(generateToken(API_TOKEN_PREFIX)) });
    expect(early).toBe(earlyBefore + 1);
    expect(await count()).toBe(before + 1);
  });
});
