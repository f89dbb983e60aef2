import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { isRunning, startEmbeddedServices, type EmbeddedOptions } from '@runtasks/shared/embedded';
import { startRunTaskServer, type RunTaskServer } from '../examples/run-task-server/server.ts';
import { eventually } from './support/fixtures.ts';
import { freePort } from './support/processes.ts';

/**
 * `npm start` and `npm run demo` with RUNTASKS_EMBEDDED=always and neither DATABASE_URL nor REDIS_URL:
 * real processes (the service, its embedded PostgreSQL, a private redis-server from PATH) in a data
 * directory of this file's own, which every case shares so that initdb runs once.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'services/api/src/main.ts');
const ADMIN_TOKEN = `embedded_${randomBytes(16).toString('hex')}`;
const HMAC_KEY = randomBytes(16).toString('hex');

let dataDir: string;
let taskServer: RunTaskServer;
const children: ChildProcess[] = [];
/** Every embedded PostgreSQL and Redis seen, killed in afterAll if a failed case left one. */
const seenPids = new Set<number>();

interface Started {
  child: ChildProcess;
  port: number;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function spawnTracked(args: string[], env: Record<string, string>): Omit<Started, 'port'> {
  let output = '';
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}

/** The service as `npm start` runs it, with no DATABASE_URL or REDIS_URL. */
async function startService(env: Record<string, string> = {}): Promise<Started> {
  const port = await freePort();
  const started = spawnTracked([MAIN], {
    PATH: process.env['PATH'] ?? '',
    RUNTASKS_EMBEDDED: 'always',
    RUNTASKS_DATA_DIR: dataDir,
    PORT: String(port),
    ADMIN_TOKEN,
    SECRET_KEY: 'embedded-test-secret-key-0123456789abcdef',
    TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
    WORKER_HEALTH_PORT: '0',
    SHUTDOWN_DRAIN_DELAY_MS: '0',
    OUTBOX_POLL_INTERVAL_MS: '200',
    LOG_LEVEL: 'info',
    ...env,
  });
  return { ...started, port };
}

/** Resolves when the API answers; fails at once with the output if the process ends first. */
async function ready(service: Started): Promise<void> {
  await eventually(async () => {
    if (service.child.exitCode !== null) throw new Error(`the service exited during start-up:\n${service.output()}`);
    const status = await fetch(`http://127.0.0.1:${service.port}/api/v2/ping`).then(
      (res) => res.status,
      () => undefined,
    );
    return status === 204 ? true : undefined;
  }, 90_000);
}

/** The pids of the data directory's embedded PostgreSQL and Redis, from their pid files. */
function embeddedPids(): { postgres: number; redis: number } {
  const read = (file: string): number => Number(readFileSync(join(dataDir, file), 'utf8').split('\n')[0]);
  const pids = { postgres: read('pg/postmaster.pid'), redis: read('redis/redis.pid') };
  seenPids.add(pids.postgres);
  seenPids.add(pids.redis);
  return pids;
}

function api(service: Started) {
  return async (
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; data: { id: string; attributes: Record<string, unknown> } }> => {
    const res = await fetch(`http://127.0.0.1:${service.port}/api/v2${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/vnd.api+json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json().catch(() => ({}))) as { data: { id: string; attributes: Record<string, unknown> } };
    return { status: res.status, data: json.data };
  };
}

async function stop(service: Started, signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  service.child.kill(signal);
  return service.exited;
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'runtasks-embedded-'));
  // As root, the embedded PostgreSQL runs as the user postgres, which must reach its directory.
  chmodSync(dataDir, 0o755);
  taskServer = await startRunTaskServer({ hmacKey: HMAC_KEY, result: 'passed', callbackDelayMs: 0 });
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pid of seenPids) if (isRunning(pid)) process.kill(pid, 'SIGKILL');
  await taskServer?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start with RUNTASKS_EMBEDDED=always and no DATABASE_URL or REDIS_URL', () => {
  let runId = '';

  it('runs a task through the example task server, keeps the run across a restart, and leaves no process after SIGTERM', async () => {
    const first = await startService();
    await ready(first);
    expect(first.output()).toMatch(/Embedded PostgreSQL \d+ on 127\.0\.0\.1:\d+/);
    expect(first.output()).toMatch(/Private Redis \(\S*(redis|valkey)-server\) on 127\.0\.0\.1:\d+/);
    const call = api(first);
    expect(
      (await call('POST', '/organizations', { data: { type: 'organizations', attributes: { name: 'acme', email: 'ops@acme.example' } } }))
        .status,
    ).toBe(201);
    const workspace = await call('POST', '/organizations/acme/workspaces', {
      data: { type: 'workspaces', attributes: { name: 'network' } },
    });
    const task = await call('POST', '/organizations/acme/tasks', {
      data: { type: 'tasks', attributes: { name: 'check', url: `${taskServer.url}/run-task`, category: 'task', 'hmac-key': HMAC_KEY } },
    });
    expect(task.status).toBe(201);
    const attached = await call('POST', `/workspaces/${workspace.data.id}/tasks`, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'mandatory', stages: ['pre_plan'] },
        relationships: { task: { data: { type: 'tasks', id: task.data.id } } },
      },
    });
    expect(attached.status).toBe(201);
    const run = await call('POST', '/runs', {
      data: {
        type: 'runs',
        attributes: { message: 'embedded', 'auto-apply': true },
        relationships: { workspace: { data: { type: 'workspaces', id: workspace.data.id } } },
      },
    });
    expect(run.status).toBe(201);
    runId = run.data.id;
    const applied = await eventually(async () => {
      const status = (await call('GET', `/runs/${runId}`)).data.attributes['status'];
      return status === 'applied' ? status : undefined;
    }, 60_000);
    expect(applied).toBe('applied');
    expect(
      taskServer.requests.some((request) => request.signatureVerified && request.callbacks.some((cb) => cb.resultStatus === 'passed')),
    ).toBe(true);

    const pids = embeddedPids();
    expect(isRunning(pids.postgres) && isRunning(pids.redis)).toBe(true);
    expect(await stop(first, 'SIGTERM')).toEqual({ code: 0, signal: null });
    // The service waited for both before it exited.
    expect({ postgres: isRunning(pids.postgres), redis: isRunning(pids.redis) }).toEqual({ postgres: false, redis: false });
    expect(existsSync(join(dataDir, 'embedded.pid'))).toBe(false);

    const second = await startService();
    await ready(second);
    const found = await api(second)('GET', `/runs/${runId}`);
    expect({ status: found.status, run: found.data.attributes['status'] }).toEqual({ status: 200, run: 'applied' });
    const again = embeddedPids();
    expect(await stop(second, 'SIGTERM')).toEqual({ code: 0, signal: null });
    expect({ postgres: isRunning(again.postgres), redis: isRunning(again.redis) }).toEqual({ postgres: false, redis: false });
  }, 240_000);

  it('refuses a second start on the same data directory, and starts after a SIGKILL, stopping the orphans', async () => {
    const first = await startService();
    await ready(first);
    const orphans = embeddedPids();

    const second = await startService();
    expect((await second.exited).code).toBe(1);
    expect(second.output()).toContain(`Another process (pid ${first.child.pid}) runs the embedded PostgreSQL/Redis in ${dataDir}`);
    expect(isRunning(orphans.postgres)).toBe(true);

    expect((await stop(first, 'SIGKILL')).signal).toBe('SIGKILL');
    // Nobody stopped them: the next start must.
    expect({ postgres: isRunning(orphans.postgres), redis: isRunning(orphans.redis) }).toEqual({ postgres: true, redis: true });

    const third = await startService();
    await ready(third);
    expect(third.output()).toContain(`Stopping the embedded PostgreSQL (pid ${orphans.postgres})`);
    expect(third.output()).toContain(`Stopping the private Redis (pid ${orphans.redis})`);
    expect({ postgres: isRunning(orphans.postgres), redis: isRunning(orphans.redis) }).toEqual({ postgres: false, redis: false });
    const found = await api(third)('GET', `/runs/${runId}`);
    expect(found.status).toBe(200);
    const pids = embeddedPids();
    expect(await stop(third, 'SIGTERM')).toEqual({ code: 0, signal: null });
    expect({ postgres: isRunning(pids.postgres), redis: isRunning(pids.redis) }).toEqual({ postgres: false, redis: false });
  }, 240_000);

  it('without a redis-server or valkey-server on PATH, says how to install one in one line and exits 1', async () => {
    // Only node (by absolute path) runs: PATH holds no Redis.
    const started = await startService({ PATH: '/nonexistent' });
    expect((await started.exited).code).toBe(1);
    const lines = started.output().trim().split('\n');
    expect(lines.at(-1)).toMatch(
      /neither redis-server nor valkey-server is on PATH: install one \(Debian\/Ubuntu: .*macOS: .*Docker: .*\) or set REDIS_URL/,
    );
  }, 60_000);
});

describe('npm run demo with RUNTASKS_EMBEDDED=always and no DATABASE_URL or REDIS_URL', () => {
  it('passes with a PostgreSQL and a Redis of its own, and stops them at the end', async () => {
    const demo = spawnTracked(['scripts/demo.ts'], {
      PATH: process.env['PATH'] ?? '',
      CI: 'true',
      RUNTASKS_EMBEDDED: 'always',
      RUNTASKS_DATA_DIR: dataDir,
      DEMO_TIMEOUT_SECONDS: '90',
    });
    const { code } = await demo.exited;
    const output = demo.output();
    expect({ code, output }).toMatchObject({ code: 0 });
    expect(output).toMatch(/run run-\w+: (applied|post_apply_completed) after/);
    expect(output).toContain('Demo finished: everything stopped.');
    const pgPort = /Embedded PostgreSQL \d+ on 127\.0\.0\.1:(\d+)/.exec(output)?.[1];
    const redisPort = /Private Redis \(\S+\) on 127\.0\.0\.1:(\d+)/.exec(output)?.[1];
    expect(pgPort && redisPort).toBeTruthy();
    // Its own directory, apart from npm start's.
    expect(existsSync(join(dataDir, 'demo', 'pg', 'PG_VERSION'))).toBe(true);
    for (const port of [pgPort, redisPort]) {
      const answer = await fetch(`http://127.0.0.1:${port}/`).then(
        () => 'answered',
        (error: Error & { cause?: { code?: string } }) => error.cause?.code ?? 'failed',
      );
      expect(answer).toBe('ECONNREFUSED');
    }
  }, 180_000);
});

describe('startEmbeddedServices with RUNTASKS_EMBEDDED=auto or never', () => {
  const options = (mode: EmbeddedOptions['mode'], postgresUrl: string, redisUrl: string): EmbeddedOptions => ({
    mode,
    dataDir: join(dataDir, 'auto'),
    postgres: { urlSet: false, defaultUrl: postgresUrl, variable: 'DATABASE_URL' },
    redis: { urlSet: false, defaultUrl: redisUrl, variable: 'REDIS_URL' },
    say: () => undefined,
  });

  it('uses what answers at the default addresses and starts nothing', async () => {
    const servers = options(
      'auto',
      process.env['TEST_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432',
      process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379/0',
    );
    expect(await startEmbeddedServices(servers)).toBeUndefined();
    expect(existsSync(join(dataDir, 'auto'))).toBe(false);
  });

  it('starts nothing with never, though nothing answers', async () => {
    const [pgPort, redisPort] = [await freePort(), await freePort()];
    expect(
      await startEmbeddedServices(options('never', `postgres://postgres@127.0.0.1:${pgPort}/x`, `redis://127.0.0.1:${redisPort}/0`)),
    ).toBeUndefined();
  });

  it('starts both when nothing answers at the default addresses, and stops both', async () => {
    const [pgPort, redisPort] = [await freePort(), await freePort()];
    // Pid files whose pid now belongs to another process (this one, as after a reboot): removed, the process left alone.
    mkdirSync(join(dataDir, 'auto', 'pg'), { recursive: true });
    mkdirSync(join(dataDir, 'auto', 'redis'), { recursive: true });
    writeFileSync(join(dataDir, 'auto', 'pg', 'postmaster.pid'), `${process.pid}\n`);
    writeFileSync(join(dataDir, 'auto', 'redis', 'redis.pid'), `${process.pid}\n`);
    writeFileSync(join(dataDir, 'auto', 'redis', 'redis.port'), `${redisPort}\n`);
    const embedded = await startEmbeddedServices(
      options('auto', `postgres://postgres@127.0.0.1:${pgPort}/x`, `redis://127.0.0.1:${redisPort}/0`),
    );
    const pids = [embedded?.postgres?.pid, embedded?.redis?.pid].filter((pid): pid is number => pid !== undefined);
    pids.forEach((pid) => seenPids.add(pid));
    try {
      expect(pids).toHaveLength(2);
      const client = new pg.Client({ connectionString: `${embedded?.postgres?.url}/postgres` });
      await client.connect();
      const { rows } = await client.query<{ one: number }>('select 1 as one');
      await client.end();
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await embedded?.stop();
    }
    expect(pids.filter((pid) => isRunning(pid))).toEqual([]);
  }, 120_000);
});
