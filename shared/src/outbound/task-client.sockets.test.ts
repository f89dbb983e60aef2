import { describe, expect, it } from '@jest/globals';
import { type lookup, type LookupAddress } from 'node:dns';
import { eventually } from '../../../test/support/fixtures.ts';
import { freePort } from '../../../test/support/processes.ts';
import { describeOutcome, RESPONSE_BODY_LIMIT } from './task-client.ts';
import { BODY, clientWith, realServer, expectError } from './task-client.fixtures.ts';

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
