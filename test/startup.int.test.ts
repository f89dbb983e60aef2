import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { databaseUrl, dropDatabase, PREFIX, SERVER_URL, withAdminClient } from './support/databases.ts';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { eventually } from './support/fixtures.ts';
import { freePort } from './support/processes.ts';

const MAIN = new URL('../services/api/src/main.ts', import.meta.url).pathname;
const databaseName = `${PREFIX}_startup_${randomAlphanumeric(6).toLowerCase()}`;

/** The status of GET /api/v2/ping once the API answers at all (within 20 s). */
function pingStatus(port: number): Promise<number> {
  return eventually(
    () =>
      fetch(`http://127.0.0.1:${port}/api/v2/ping`)
        .then((res) => res.status)
        .catch(() => undefined),
    20_000,
  );
}

interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function start(env: Record<string, string>): Started {
  let stdout = '';
  let stderr = '';
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env['PATH'] ?? '',
      REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0',
      SECRET_KEY: 'startup-test-secret-key-0123456789abcdef',
      LOG_LEVEL: 'silent',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

describe('npm start (API and worker in one process)', () => {
  afterAll(async () => {
    await withAdminClient((client) => dropDatabase(client, databaseName));
  });

  it('creates the database, migrates, prints a site-admin token once, serves the API and stops on SIGTERM', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: databaseUrl(databaseName), PORT: String(port), QUEUE_PREFIX: `test-${randomAlphanumeric(8)}` };
    const first = start(env);
    const token = await eventually(async () => /Site-admin token[^\n]*\n\s*\n\s+(\S+)/.exec(first.stdout())?.[1], 20_000);
    const ping = await pingStatus(port);
    expect(ping).toBe(204);
    const organizations = await fetch(`http://127.0.0.1:${port}/api/v2/organizations`, { headers: { Authorization: `Bearer ${token}` } });
    expect(organizations.status).toBe(200);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    // Second start: same database, no new token printed, and the first token still works.
    const second = start(env);
    await pingStatus(port);
    const again = await fetch(`http://127.0.0.1:${port}/api/v2/organizations`, { headers: { Authorization: `Bearer ${token}` } });
    expect(again.status).toBe(200);
    expect(second.stdout()).not.toContain('Site-admin token');
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 60_000);

  it('stops cleanly (exit 0) on a SIGTERM that comes while it is still starting', async () => {
    const port = await freePort();
    const name = `${databaseName}_early`;
    try {
      const starting = start({ DATABASE_URL: databaseUrl(name), PORT: String(port), QUEUE_PREFIX: `test-${randomAlphanumeric(8)}` });
      // The token is printed before the API listens and the worker starts: the signal comes in the middle of start-up.
      await eventually(async () => (starting.stdout().includes('Site-admin token') ? true : undefined), 20_000);
      starting.child.kill('SIGTERM');
      expect(await starting.exited).toBe(0);
      expect(starting.stderr()).toBe('');
    } finally {
      await withAdminClient((client) => dropDatabase(client, name));
    }
  }, 60_000);

  it('accepts ADMIN_TOKEN as the site-admin token', async () => {
    const port = await freePort();
    const adminToken = `chosen_${randomAlphanumeric(24)}`;
    const started = start({
      DATABASE_URL: databaseUrl(databaseName),
      PORT: String(port),
      ADMIN_TOKEN: adminToken,
      QUEUE_PREFIX: `test-${randomAlphanumeric(8)}`,
    });
    await pingStatus(port);
    const res = await fetch(`http://127.0.0.1:${port}/api/v2/organizations`, { headers: { Authorization: `Bearer ${adminToken}` } });
    expect(res.status).toBe(200);
    started.child.kill('SIGTERM');
    expect(await started.exited).toBe(0);
  }, 60_000);

  it('keeps to DATABASE_POOL_SIZE connections for requests, however many arrive at once', async () => {
    const port = await freePort();
    const adminToken = `pool_${randomAlphanumeric(24)}`;
    const started = start({
      // The URL's application_name reaches every connection, the pool's too (MikroORM keeps only part of the URL).
      DATABASE_URL: `${databaseUrl(databaseName)}?application_name=pool-check`,
      DATABASE_POOL_SIZE: '2',
      RATE_LIMIT_PER_SECOND: '0',
      PORT: String(port),
      ADMIN_TOKEN: adminToken,
      QUEUE_PREFIX: `test-${randomAlphanumeric(8)}`,
    });
    try {
      await pingStatus(port);
      const backends = (): Promise<number> =>
        withAdminClient(async (client) => {
          const { rows } = await client.query<{ n: string }>('select count(*) as n from pg_stat_activity where datname = $1', [
            databaseName,
          ]);
          return Number(rows[0]?.n ?? 0);
        });
      let most = await backends();
      let answered = 0;
      const requests = Promise.all(
        Array.from({ length: 40 }, () =>
          fetch(`http://127.0.0.1:${port}/api/v2/organizations`, { headers: { Authorization: `Bearer ${adminToken}` } }).then((res) => {
            if (res.status === 200) answered += 1;
          }),
        ),
      );
      let done = false;
      void requests.finally(() => (done = true));
      while (!done) most = Math.max(most, await backends());
      await requests;
      most = Math.max(most, await backends());
      expect(answered).toBe(40);
      // Still open: the pool's (idle for less than its timeout) and the two LISTEN connections.
      const names = await withAdminClient(async (client) => {
        const { rows } = await client.query<{ application_name: string }>(
          `select application_name from pg_stat_activity where datname = $1 and backend_type = 'client backend'`,
          [databaseName],
        );
        return rows.map((row) => row.application_name);
      });
      expect(names.length).toBeGreaterThan(2);
      expect(new Set(names)).toEqual(new Set(['pool-check']));
      // The pool's two, and two LISTEN connections: the outbox relay's and the principal cache's.
      expect(most).toBeLessThanOrEqual(4);
    } finally {
      started.child.kill('SIGTERM');
      expect(await started.exited).toBe(0);
    }
  }, 60_000);

  it('lets API processes share PORT when each has REUSE_PORT=true, and refuses a second one in one clear line otherwise', async () => {
    const port = await freePort();
    const env = {
      DATABASE_URL: databaseUrl(databaseName),
      PORT: String(port),
      ADMIN_TOKEN: `share_${randomAlphanumeric(24)}`,
      QUEUE_PREFIX: `test-${randomAlphanumeric(8)}`,
      LOG_LEVEL: 'info',
    };
    const children: Started[] = [];
    const launch = (variables: Record<string, string>): Started => {
      const started = start(variables);
      children.push(started);
      return started;
    };
    try {
      const alone = launch(env);
      expect(await pingStatus(port)).toBe(204);
      const refused = launch(env);
      expect(await refused.exited).toBe(1);
      expect(refused.stderr().trim().split('\n')).toEqual([expect.stringContaining(`PORT=${port} `)]);
      expect(refused.stderr()).toContain('REUSE_PORT=true');
      alone.child.kill('SIGTERM');
      expect(await alone.exited).toBe(0);

      const shared = { ...env, REUSE_PORT: 'true' };
      const first = launch(shared);
      expect(await pingStatus(port)).toBe(204);
      const second = launch(shared);
      await eventually(async () => (second.stdout().includes('"msg":"listening"') ? true : undefined), 20_000);
      // The first stops; the port still answers: the second listens on it too.
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
      expect(await pingStatus(port)).toBe(204);
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    } finally {
      // Whatever an assertion above left running.
      for (const { child } of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 90_000);

  it.each([
    ['DATABASE_URL', { DATABASE_URL: `${SERVER_URL.replace(/:\d+$/, ':1')}/runtasks` }],
    ['REDIS_URL', { DATABASE_URL: databaseUrl(databaseName), REDIS_URL: 'redis://127.0.0.1:1/0' }],
  ])(
    'prints one clear line naming %s and exits 1 when the service is unreachable',
    async (variable, env) => {
      // Without waiting for it (test/startup-wait.int.test.ts waits).
      const started = start({ ...env, PORT: '0', STARTUP_TIMEOUT_SECONDS: '0' });
      expect(await started.exited).toBe(1);
      const lines = started.stderr().trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`${variable}=`);
      expect(lines[0]).toContain('npm start');
      expect(started.stderr()).not.toMatch(/\n\s+at /);
    },
    30_000,
  );
});
