import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Agent, request } from 'node:http';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * A small body read whole (readRawBody: forms, CSP reports) that passes its limit stops being read at
 * the limit, and the rest is dropped: the connection is not reset, so the answer reaches the client and
 * the same kept-alive connection serves its next request.
 */

interface Answer {
  status: number;
  body: string;
  /** Whether the request went over a connection an earlier request had used. */
  reused: boolean;
}

/** A request over `agent`, its body sent chunked in 8 KiB parts (no Content-Length: the limit is met while reading). */
function send(agent: Agent, url: string, method: string, headers: Record<string, string>, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), reused: req.reusedSocket }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body) for (let at = 0; at < body.length; at += 8192) req.write(body.subarray(at, at + 8192));
    req.end();
  });
}

describe('a body past its limit read by readRawBody', () => {
  let h: Harness;
  let agent: Agent;

  beforeAll(async () => {
    h = await startHarness({ ops: true });
  });
  afterAll(async () => {
    agent?.destroy();
    await h?.close();
  });

  it('keeps the connection: a CSP report of 2 MiB (its limit: 16 KiB) is answered, and the next request goes over the same connection', async () => {
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const report = Buffer.from(JSON.stringify({ 'csp-report': { 'document-uri': 'x'.repeat(2 * 1024 * 1024) } }));
    const first = await send(agent, `${h.baseUrl}/csp-report`, 'POST', { 'Content-Type': 'application/csp-report' }, report);
    expect(first.status).toBe(204);
    const second = await send(agent, `${h.baseUrl}/healthz`, 'GET', {});
    expect([second.status, second.reused]).toEqual([200, true]);
  });

  it('keeps the connection: a sign-in form past 64 KiB is answered 413, and the next request goes over the same connection', async () => {
    agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const warmUp = await send(agent, `${h.baseUrl}/healthz`, 'GET', {});
    expect([warmUp.status, warmUp.reused]).toEqual([200, false]);
    const form = Buffer.from(`token=${'a'.repeat(200 * 1024)}`);
    const refused = await send(agent, `${h.baseUrl}/session`, 'POST', { 'Content-Type': 'application/x-www-form-urlencoded' }, form);
    expect([refused.status, refused.reused]).toEqual([413, true]);
    expect(refused.body).toContain('65536 bytes');
    const next = await send(agent, `${h.baseUrl}/healthz`, 'GET', {});
    expect([next.status, next.reused]).toEqual([200, true]);
  });
});
