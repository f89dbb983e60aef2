import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { randomAlphanumeric } from '@runtasks/shared/domain';
import { spawn } from 'node:child_process';
import { harness, onCleanup, privatePostgres, privateRedis, runCleanups, WorkerFleet, workerEnv } from './support/cluster.ts';
import { databaseUrl, SERVER_URL } from './support/databases.ts';
import { eventually } from './support/fixtures.ts';
import { TEST_SECRET_KEY } from './support/harness.ts';
import { freePort } from './support/processes.ts';

/**
 * Start-up while PostgreSQL or Redis is not up yet (a process manager, `docker compose up` in any order):
 * the API and the worker wait, with a line per attempt, for up to STARTUP_TIMEOUT_SECONDS, and start
 * once the service answers; past the timeout they exit 1 with the one line they always printed.
 */

const API_MAIN = new URL('../services/api/src/main.ts', import.meta.url).pathname;
const WORKER_MAIN = new URL('../services/worker/src/main.ts', import.meta.url).pathname;

interface Spawned {
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

/** A process from the sources, killed by the cleanups if still running. */
function launch(main: string, args: string[], env: Record<string, string>): Spawned {
  let stdout = '';
  let stderr = '';
  const child = spawn(process.execPath, [main, ...args], {
    env: { PATH: process.env['PATH'] ?? '', SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    return exited;
  }, 'process');
  return { stdout: () => stdout, stderr: () => stderr, exited };
}

const messages = (output: string): string[] =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => String((JSON.parse(line) as { msg?: unknown }).msg));
const waitingLines = (output: string, service: string): string[] =>
  messages(output).filter((msg) => msg.startsWith(`Waiting for ${service} `));

describe('start-up waits for its backing services', () => {
  afterEach(runCleanups, 60_000);
  afterAll(runCleanups, 60_000);

  it('npm start before PostgreSQL is up waits for it, then creates the database and serves', async () => {
    const cluster = await privatePostgres();
    const port = await freePort();
    const started = launch(API_MAIN, [], {
      DATABASE_URL: cluster.url('runtasks_late'),
      REDIS_URL: process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0',
      PORT: String(port),
      QUEUE_PREFIX: `test-${randomAlphanumeric(8)}`,
      ADMIN_TOKEN: `late_${randomAlphanumeric(24)}`,
      WORKER_HEALTH_PORT: '0',
    });
    // It is waiting, not gone: several attempts, each a line naming the variable and what is left.
    await eventually(async () => (waitingLines(started.stdout(), 'PostgreSQL').length >= 3 ? true : undefined), 20_000, 50);
    expect(waitingLines(started.stdout(), 'PostgreSQL')[0]).toMatch(
      /^Waiting for PostgreSQL at DATABASE_URL=postgres:\/\/postgres@127\.0\.0\.1:\d+\/runtasks_late \(ECONNREFUSED\): attempt 1, next in 0\.5 s, \d+ s left of STARTUP_TIMEOUT_SECONDS=60$/,
    );

    await cluster.start();
    await eventually(async () => (messages(started.stdout()).includes('listening') ? true : undefined), 30_000, 50);
    const ping = await fetch(`http://127.0.0.1:${port}/api/v2/ping`);
    expect(ping.status).toBe(204);
    expect(messages(started.stdout())).toContain(
      'PostgreSQL answers at DATABASE_URL=' +
        cluster.url('runtasks_late') +
        ` after ${waitingLines(started.stdout(), 'PostgreSQL').length + 1} attempts`,
    );
    expect(started.stderr()).toBe('');
  }, 90_000);

  it('a worker started before Redis is up waits for it, then starts', async () => {
    const redis = privateRedis(await freePort());
    const h = await harness({});
    const fleet = new WorkerFleet(workerEnv(h, { REDIS_URL: redis.url }));
    const worker = fleet.start();
    await eventually(
      async () => (worker.messages.filter((msg) => msg.startsWith('Waiting for Redis ')).length >= 2 ? true : undefined),
      20_000,
      50,
    );
    expect(worker.messages.some((msg) => msg.startsWith('Waiting for PostgreSQL '))).toBe(false);

    await redis.start();
    await worker.started;
    expect(fleet.unexpectedExits).toEqual([]);
  }, 60_000);

  it.each([
    ['the API', 'DATABASE_URL', API_MAIN, ['--role', 'api'], { DATABASE_URL: `${SERVER_URL.replace(/:\d+$/, ':1')}/runtasks` }],
    ['a worker', 'DATABASE_URL', WORKER_MAIN, [], { DATABASE_URL: `${SERVER_URL.replace(/:\d+$/, ':1')}/runtasks` }],
    ['a worker', 'REDIS_URL', WORKER_MAIN, [], { DATABASE_URL: databaseUrl('postgres'), REDIS_URL: 'redis://127.0.0.1:1/0' }],
  ])(
    '%s exits 1 with one line naming %s once STARTUP_TIMEOUT_SECONDS has passed',
    async (_who, variable, main, args, env) => {
      const startedAt = Date.now();
      const started = launch(main, args, { ...env, STARTUP_TIMEOUT_SECONDS: '2', PORT: '0', WORKER_HEALTH_PORT: '0' });
      expect(await started.exited).toBe(1);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(2_000);
      const service = variable === 'REDIS_URL' ? 'Redis' : 'PostgreSQL';
      // A line per attempt while it waited (0.5, 1 s, then what was left).
      expect(waitingLines(started.stdout(), service).length).toBeGreaterThanOrEqual(2);
      const lines = started.stderr().trim().split('\n');
      expect(lines).toEqual([expect.stringMatching(new RegExp(`^Cannot reach ${service} at ${variable}=.*npm start again\\.$`))]);
    },
    30_000,
  );
});
