import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startRunTaskServer, type RunTaskServer } from '../../../examples/run-task-server/server.ts';
import { expectError, type Response } from '../../../test/support/assertions.ts';
import { eventually, impatientApi as api, JSON_API } from '../../../test/support/fixtures.ts';
import { startHarness, TEST_SECRET_KEY, type Harness } from '../../../test/support/harness.ts';
import { startWorker, type RunningWorker } from '../../worker/src/worker.ts';
import { freePort, probe, readiness } from '../../../test/support/processes.ts';

/** Operations under load and shutdown: per-token rate limits, and the API process's drain on SIGTERM. */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

describe('rate limits (RATE_LIMIT_PER_SECOND=3)', () => {
  let h: Harness;
  let worker: RunningWorker;
  const servers: RunTaskServer[] = [];
  let organization: string;
  let organizationToken: string;
  let teamToken: string;
  let resultIds: string[];
  const accessTokens = new Map<string, string>();

  /** A setup request: it shares the small budget, so a 429 is retried (polling, bounded); then it must be a 201. */
  async function setup(method: 'post', path: string, token: string, body?: unknown): Promise<Response> {
    const res = await eventually(
      async () => {
        const sent = await api(h, method, path, token, body);
        return sent.status === 429 ? undefined : sent;
      },
      10_000,
      100,
    );
    if (res.status !== 201) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res;
  }

  const callback = (resultId: string, token: string) =>
    h.http
      .patch(`/api/v2/task-results/${resultId}/callback`)
      .set('Authorization', `Bearer ${token}`)
      .set('Content-Type', JSON_API)
      .send(JSON.stringify({ data: { type: 'task-results', attributes: { status: 'running', message: 'still checking' } } }));

  function expectLimited(res: Response): void {
    expectError(res, 429);
    expect(res.body.errors[0].title).toBe('too many requests');
    expect(res.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(res.headers['x-ratelimit-limit']).toBe('3');
  }

  beforeAll(async () => {
    h = await startHarness({ ops: true, reachableBaseUrl: true, env: { RATE_LIMIT_PER_SECOND: '3' } });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    organization = 'ops-limits';
    await setup('post', '/organizations', h.adminToken, {
      data: { type: 'organizations', attributes: { name: organization, email: 'ops-limits@example.test' } },
    });
    organizationToken = (await setup('post', `/organizations/${organization}/authentication-token`, h.adminToken)).body.data.attributes
      .token as string;
    const workspace = await setup('post', `/organizations/${organization}/workspaces`, organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'limits-ws' } },
    });
    const team = await setup('post', `/organizations/${organization}/teams`, organizationToken, {
      data: { type: 'teams', attributes: { name: 'limits-team' } },
    });
    teamToken = (await setup('post', `/teams/${team.body.data.id}/authentication-token`, organizationToken)).body.data.attributes
      .token as string;
    // Two tasks that acknowledge and never call back: two results whose callbacks the test sends itself.
    for (const name of ['limits-a', 'limits-b']) {
      const server = await startRunTaskServer({ mode: 'no-callback' });
      servers.push(server);
      const task = await setup('post', `/organizations/${organization}/tasks`, organizationToken, {
        data: { type: 'tasks', attributes: { name, url: `${server.url}/run-task`, category: 'task' } },
      });
      await setup('post', `/workspaces/${workspace.body.data.id}/tasks`, organizationToken, {
        data: {
          type: 'workspace-tasks',
          attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
          relationships: { task: { data: { type: 'tasks', id: task.body.data.id } } },
        },
      });
    }
    await setup('post', '/runs', organizationToken, {
      data: { type: 'runs', attributes: {}, relationships: { workspace: { data: { type: 'workspaces', id: workspace.body.data.id } } } },
    });
    // Each task server received its run task request, with the result's access token.
    for (const server of servers) {
      const request = await eventually(
        async () => server.requests.find((candidate) => !candidate.verification && candidate.status === 200),
        20_000,
      );
      accessTokens.set(request.payload?.task_result_id ?? '', request.payload?.access_token ?? '');
    }
    resultIds = [...accessTokens.keys()];
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await Promise.all(servers.map((server) => server.close()));
    await h?.close();
  }, 30_000);

  it('answers a burst from one token with 429 JSON:API errors, leaves other tokens alone, and lets the token in again', async () => {
    const burstOf = (count: number) =>
      Promise.all(Array.from({ length: count }, () => api(h, 'get', `/organizations/${organization}`, organizationToken)));
    const first = await burstOf(10);
    const limited = first.filter((res) => res.status === 429);
    const passed = first.filter((res) => res.status === 200);
    expect(limited.length + passed.length).toBe(10);
    // Setup may have left part of a window, and a window may end mid-burst: at most two windows' worth pass.
    expect(passed.length).toBeLessThanOrEqual(6);
    expect(limited.length).toBeGreaterThanOrEqual(4);
    for (const res of limited) expectLimited(res);
    for (const res of passed) expect(res.headers['x-ratelimit-limit']).toBe('3');

    // Another principal has its own budget.
    const other = await api(h, 'get', '/organizations', teamToken);
    expect(other.status).toBe(200);
    expect(other.headers['x-ratelimit-limit']).toBe('3');

    // The window passes and the first token works again: that request opens a fresh window ...
    const again = await eventually(
      async () => {
        const res = await api(h, 'get', `/organizations/${organization}`, organizationToken);
        return res.status === 429 ? undefined : res;
      },
      5000,
      100,
    );
    expect(again.status).toBe(200);
    // ... in which exactly the remaining two of three pass.
    const second = await burstOf(10);
    expect(second.map((res) => res.status).sort()).toEqual([200, 200, ...Array.from({ length: 8 }, () => 429)]);
  });

  it('gives callbacks their own budget per task result', async () => {
    const [first, second] = resultIds;
    if (!first || !second) throw new Error('two task results expected');
    // The organization token is spent: callbacks do not share its budget.
    const spent = await Promise.all(Array.from({ length: 8 }, () => api(h, 'get', `/organizations/${organization}`, organizationToken)));
    expect(spent.some((res) => res.status === 429)).toBe(true);

    const burst = await Promise.all(Array.from({ length: 8 }, () => callback(first, accessTokens.get(first) ?? '')));
    const passed = burst.filter((res) => res.status === 200);
    const limited = burst.filter((res) => res.status === 429);
    expect(passed.length + limited.length).toBe(8);
    expect(passed.length).toBeGreaterThanOrEqual(1);
    expect(passed.length).toBeLessThanOrEqual(3);
    for (const res of limited) expectLimited(res);

    // The other result's callback is not limited by the first one's.
    const other = await callback(second, accessTokens.get(second) ?? '');
    expect(other.status).toBe(200);
    expect(other.body.data.attributes.status).toBe('running');

    const again = await eventually(
      async () => {
        const res = await callback(first, accessTokens.get(first) ?? '');
        return res.status === 429 ? undefined : res;
      },
      5000,
      100,
    );
    expect(again.status).toBe(200);
  });
});

describe('the API process drains on SIGTERM', () => {
  let h: Harness;
  let child: ChildProcess | undefined;
  const output: string[] = [];

  beforeAll(async () => {
    h = await startHarness();
  });

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await h?.close();
  });

  it('answers /readyz 503 (draining) before closing the listener, then exits 0', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const started = spawn(process.execPath, ['services/api/src/main.ts', '--role', 'api'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env['PATH'] ?? '',
        NODE_ENV: 'test',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: h.config.databaseUrl,
        REDIS_URL: h.config.redisUrl,
        QUEUE_PREFIX: h.config.queuePrefix,
        SECRET_KEY: TEST_SECRET_KEY,
        SHUTDOWN_DRAIN_DELAY_MS: '1500',
        LOG_LEVEL: 'warn',
      },
    });
    child = started;
    started.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    started.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      started.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const context = (): string => `process output:\n${output.join('').slice(-3000)}`;

    await eventually(async () => {
      if (started.exitCode !== null) throw new Error(`the API exited early (${started.exitCode}); ${context()}`);
      const result = await probe(`${base}/readyz`);
      return result.status === 200 ? result : undefined;
    }, 20_000);

    const signalled = Date.now();
    started.kill('SIGTERM');
    // Still listening, but no longer ready.
    const draining = await eventually(
      async () => {
        const result = await probe(`${base}/readyz`);
        if (result.error) throw new Error(`the listener closed before /readyz said 503 (${result.error}); ${context()}`);
        return result.status === 503 ? result : undefined;
      },
      5000,
      20,
    );
    expect(readiness(draining)).toEqual({
      ready: false,
      components: expect.objectContaining({ draining: { ok: false, detail: 'shutting down' }, postgres: { ok: true } }),
    });
    expect((await probe(`${base}/healthz`)).status).toBe(200);

    // Then the listener closes, and the process exits 0. A probe that connects just as the server
    // closes its idle connections is reset; only a refused connection says the listener is gone.
    await eventually(
      async () => {
        const result = await probe(`${base}/readyz`);
        if (result.error && result.error !== 'ECONNREFUSED' && result.error !== 'ECONNRESET') throw new Error(`probe: ${result.error}`);
        return result.error === 'ECONNREFUSED' ? result : undefined;
      },
      10_000,
      20,
    );
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1400);
    const exit = await Promise.race([exited, new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), 15_000).unref())]);
    expect({ exit, output: exit === 'timeout' || exit.code !== 0 ? context() : '' }).toEqual({
      exit: { code: 0, signal: null },
      output: '',
    });
  }, 60_000);
});
