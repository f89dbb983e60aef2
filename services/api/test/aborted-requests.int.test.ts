import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loggerOptions } from '@runtasks/shared/logger';
import { connect } from 'node:net';
import { pino } from 'pino';
import { api, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

interface LogLine {
  level: number;
  msg: string;
  route?: string;
  status?: number;
}

/**
 * A client that closes its connection halfway through its request's body: the request fails reading
 * it, which is the client's doing. It is answered and recorded as 499 ("client closed request", as
 * the body parser answers one closed before it reads it; nobody reads it), not as a 503 "backing service
 * unavailable" with an error logged, which is what a monitor alerts on.
 */
describe('requests their client aborts', () => {
  const lines: string[] = [];
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    const logger = pino(loggerOptions('debug', 'aborted-test'), { write: (line: string) => void lines.push(line) });
    h = await startHarness({ logger, env: { LOG_LEVEL: 'debug' } });
    f = await seedOrganization(h, 'aborted');
  });
  afterAll(async () => {
    await h?.close();
  });

  const logged = (): LogLine[] => lines.map((line) => JSON.parse(line) as LogLine);

  /** Sends the head and part of the body, then closes the connection; returns the request's log line. */
  async function abortMidBody(method: string, path: string, headers: Record<string, string>): Promise<LogLine> {
    const before = lines.length;
    const socket = connect(Number(new URL(h.baseUrl).port), '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    const head = Object.entries({ host: 'runtasks.test', 'content-length': '100000', ...headers })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n${'x'.repeat(5000)}`);
    // Once the server has begun reading the body, the client goes.
    await new Promise((resolve) => setImmediate(resolve));
    socket.destroy();
    return eventually(async () =>
      logged()
        .slice(before)
        .find((line) => line.msg === 'request'),
    );
  }

  it('an upload cut off mid-body is a 499, and no error is logged', async () => {
    const version = await api(h, 'post', `/workspaces/${f.workspaceId}/configuration-versions`, f.organizationToken, {
      data: { type: 'configuration-versions', attributes: {} },
    });
    expect(version.status).toBe(201);
    const uploadPath = new URL(String(version.body.data.attributes['upload-url'])).pathname;
    const errorsBefore = logged().filter((line) => line.level >= 50).length;

    const line = await abortMidBody('PUT', uploadPath, { 'content-type': 'application/octet-stream' });
    expect(line.status).toBe(499);
    expect(logged().filter((entry) => entry.level >= 50)).toHaveLength(errorsBefore);
  });

  it('a JSON body cut off mid-way is a 499, and no error is logged', async () => {
    const errorsBefore = logged().filter((line) => line.level >= 50).length;
    const line = await abortMidBody('POST', `/api/v2/organizations/${f.organization}/workspaces`, {
      authorization: `Bearer ${f.organizationToken}`,
      'content-type': 'application/vnd.api+json',
    });
    expect(line.status).toBe(499);
    expect(logged().filter((entry) => entry.level >= 50)).toHaveLength(errorsBefore);
  });
});
