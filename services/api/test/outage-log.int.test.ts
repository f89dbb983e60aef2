import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { loggerOptions } from '@runtasks/shared/logger';
import { openOrm } from '@runtasks/shared/db';
import { pino } from 'pino';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent.js';
import { startFaultProxy, type FaultProxy } from '../../../test/support/fault-proxy.ts';
import { eventually } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { buildApp } from '../src/app.ts';

interface LogLine {
  level: number;
  msg: string;
  answered503?: number;
}

/**
 * An outage of PostgreSQL, as an API process sees it: every request is answered 503 (correctly), and the
 * log says so twice, a warning when it starts and one when it ends with the count of 503s, instead of an
 * error line per request. The API under test reaches PostgreSQL through a fault proxy that resets every
 * connection while the outage lasts.
 */
describe('an outage in the log', () => {
  const lines: string[] = [];
  let h: Harness;
  let proxy: FaultProxy;
  let proxiedOrm: MikroORM;
  let http: TestAgent;

  beforeAll(async () => {
    h = await startHarness();
    const direct = new URL(h.config.databaseUrl);
    proxy = await startFaultProxy({ targetHost: direct.hostname, targetPort: Number(direct.port || 5432) });
    const viaProxy = new URL(h.config.databaseUrl);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    proxiedOrm = await openOrm(viaProxy.toString(), 3);
    const logger = pino(loggerOptions('info', 'outage-test'), { write: (line: string) => void lines.push(line) });
    // No principal cache: every request looks its token up, so every one needs PostgreSQL.
    http = request(buildApp({ config: h.config, secrets: h.secrets, taskClient: h.taskClient, orm: proxiedOrm, logger }).callback());
  });
  afterAll(async () => {
    proxy?.setMode({ kind: 'pass' });
    await proxiedOrm?.close(true);
    await proxy?.stop();
    await h?.close();
  });

  const logged = (from: number): LogLine[] => lines.slice(from).map((line) => JSON.parse(line) as LogLine);
  const organizations = () => http.get('/api/v2/organizations').set('Authorization', `Bearer ${h.adminToken}`);

  it('logs one warning as it starts and one as it ends with the number of 503s, and no error per request', async () => {
    expect((await organizations()).status).toBe(200);
    const from = lines.length;

    proxy.setMode({ kind: 'reset' });
    const statuses: number[] = [];
    for (let index = 0; index < 25; index += 1) statuses.push((await organizations()).status);
    expect(statuses).toEqual(statuses.map(() => 503));
    // Still within the outage: one warning, no error, and nothing yet about its end.
    const during = logged(from).filter((line) => line.msg !== 'request');
    expect(during.filter((line) => line.level >= 50)).toEqual([]);
    expect(during.filter((line) => line.level === 40).map((line) => line.msg)).toEqual([expect.stringMatching(/^outage started/)]);

    proxy.setMode({ kind: 'pass' });
    const ended = await eventually(async () => logged(from).find((line) => line.msg.startsWith('outage ended')), 15_000, 50);
    expect(ended).toMatchObject({ level: 40, answered503: 25 });
    expect(ended.msg).toContain('25 requests were answered 503');
    expect((await organizations()).status).toBe(200);

    // The whole outage: two warnings, no error line, and no "unhandled error" at any level.
    const all = logged(from).filter((line) => line.msg !== 'request');
    expect(all.filter((line) => line.level >= 40).map((line) => line.msg)).toEqual([
      expect.stringMatching(/^outage started/),
      expect.stringMatching(/^outage ended/),
    ]);
    expect(all.some((line) => line.msg === 'unhandled error')).toBe(false);
    // The access log still has each request.
    expect(logged(from).filter((line) => line.msg === 'request')).toHaveLength(26);
  }, 60_000);

  it('a second outage is told again, with its own count', async () => {
    const from = lines.length;
    proxy.setMode({ kind: 'reset' });
    for (let index = 0; index < 3; index += 1) expect((await organizations()).status).toBe(503);
    proxy.setMode({ kind: 'pass' });
    const ended = await eventually(async () => logged(from).find((line) => line.msg.startsWith('outage ended')), 15_000, 50);
    expect(ended.answered503).toBe(3);
    expect(logged(from).filter((line) => line.msg.startsWith('outage started'))).toHaveLength(1);
  }, 60_000);
});
