import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Koa from 'koa';
import request from 'supertest';
import { DEFAULT_HTML_POLICY, securityHeaders } from '../src/http/security-headers.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/** The security headers of every answer, and the rate limit's budget headers as HCP sends them. */
describe('security headers on the API', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ ops: true, env: { RATE_LIMIT_PER_SECOND: '5' } });
  });
  afterAll(async () => {
    await h.close();
  });

  it.each([
    ['a 204', (agent: Harness['http']) => agent.get('/api/v2/ping'), 204],
    ['a JSON:API 404', (agent: Harness['http']) => agent.get('/api/v2/no-such-thing'), 404],
    ['a 401', (agent: Harness['http']) => agent.get('/api/v2/organizations'), 401],
    ['a probe', (agent: Harness['http']) => agent.get('/healthz'), 200],
    ['the OpenAPI document', (agent: Harness['http']) => agent.get('/openapi.json'), 200],
  ])('%s carries nosniff and, not being HTML, no policy', async (_label, send, status) => {
    const res = await send(h.http);
    expect(res.status).toBe(status);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['content-security-policy']).toBeUndefined();
  });

  it('the dashboard refusing a client is nosniff too', async () => {
    const res = await h.http.get('/admin/queues');
    expect(res.status).toBe(401);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('/docs keeps its own policy: never framed, no inline script', async () => {
    const res = await h.http.get('/docs');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    const policy = String(res.headers['content-security-policy']);
    expect(policy).toContain("frame-ancestors 'none'");
    const scriptSrc = /script-src ([^;]*)/.exec(policy)?.[1] ?? '';
    expect(scriptSrc.trim()).toBe("'self'");
    expect([...res.text.matchAll(/<script(?![^>]*\ssrc=)[^>]*>/g)]).toEqual([]);
  });

  it('sends X-RateLimit-Remaining and X-RateLimit-Reset beside X-RateLimit-Limit, and on the 429', async () => {
    const answers = [];
    for (let index = 0; index < 6; index += 1) {
      answers.push(await h.http.get('/api/v2/organizations').set('Authorization', `Bearer ${h.adminToken}`));
    }
    const first = answers[0];
    expect(first?.status).toBe(200);
    expect(first?.headers['x-ratelimit-limit']).toBe('5');
    expect(first?.headers['x-ratelimit-remaining']).toBe('4');
    const reset = Number(first?.headers['x-ratelimit-reset']);
    expect(reset).toBeGreaterThan(0);
    expect(reset).toBeLessThanOrEqual(1);
    const remaining = answers.map((res) => res.headers['x-ratelimit-remaining']);
    // Within one second of each other (else the window restarted and the count with it).
    if (answers.at(-1)?.status === 429) {
      expect(remaining).toEqual(['4', '3', '2', '1', '0', '0']);
      expect(answers.at(-1)?.headers['x-ratelimit-limit']).toBe('5');
      expect(Number(answers.at(-1)?.headers['x-ratelimit-reset'])).toBeLessThanOrEqual(1);
    }
  });
});

describe('the security headers middleware', () => {
  const app = new Koa();
  app.use(securityHeaders);
  app.use(async (ctx) => {
    if (ctx.path === '/own-policy') {
      ctx.set('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
      ctx.type = 'text/html';
      ctx.body = '<p>own</p>';
    } else if (ctx.path === '/page') {
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = '<p>page</p>';
    } else {
      ctx.body = { ok: true };
    }
  });
  const agent = request(app.callback());

  it('gives an HTML page without a policy the default one', async () => {
    const res = await agent.get('/page');
    expect(res.headers['content-security-policy']).toBe(DEFAULT_HTML_POLICY);
    expect(DEFAULT_HTML_POLICY).toContain("frame-ancestors 'none'");
    expect(/script-src ([^;]*)/.exec(DEFAULT_HTML_POLICY)?.[1]).toBe("'self'");
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('keeps the policy a page set itself', async () => {
    const res = await agent.get('/own-policy');
    expect(res.headers['content-security-policy']).toBe("default-src 'none'; frame-ancestors 'none'");
  });

  it('gives JSON no policy, but nosniff', async () => {
    const res = await agent.get('/data');
    expect(res.headers['content-security-policy']).toBeUndefined();
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });
});
