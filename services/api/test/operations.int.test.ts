import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loggerOptions } from '@runtasks/shared/logger';
import { Metrics } from '@runtasks/shared/ops';
import { pino } from 'pino';
import { startRunTaskServer, type RunTaskServer } from '../../../examples/run-task-server/server.ts';
import { configurationArchive } from '../../../test/support/archives.ts';
import {
  api,
  attachTask,
  createTask,
  createTeamToken,
  eventually,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, TEST_SECRET_KEY, type Harness } from '../../../test/support/harness.ts';
import { startWorker, type RunningWorker } from '../../worker/src/worker.ts';
import { API_PREFIX } from '../src/http/jsonapi.ts';
import { ROUTES } from '../src/routes/index.ts';
import { freePort, PrivateRedis, probe, readiness } from '../../../test/support/processes.ts';

/**
 * Operations: probes (with a private Redis that is stopped and started again), metrics and logs of
 * a full run (API and an in-process worker sharing one registry and one logger, a real task
 * server). Rate limits and the drain on SIGTERM are in operations-limits.int.test.ts.
 */

describe('probes: /healthz and /readyz follow Redis going away and coming back', () => {
  let h: Harness;
  let redis: PrivateRedis;

  beforeAll(async () => {
    redis = new PrivateRedis(await freePort());
    await redis.start();
    h = await startHarness({ ops: true, env: { REDIS_URL: redis.url } });
  }, 30_000);

  afterAll(async () => {
    // The harness closes its queue through Redis: make sure it is there.
    await redis?.start();
    await h?.close();
    await redis?.stop();
  }, 30_000);

  it('answers /healthz 200 and /readyz 200 with every component ok', async () => {
    const health = await probe(`${h.baseUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body ?? '')).toEqual({ status: 'ok' });
    // The Redis client connects in the background: poll until the first check has it.
    const ready = await eventually(async () => {
      const result = await probe(`${h.baseUrl}/readyz`);
      return result.status === 200 ? result : undefined;
    });
    expect(readiness(ready)).toEqual({
      ready: true,
      components: {
        postgres: { ok: true },
        // The mode and the node it talks to (docs/operations.md): a single node here.
        redis: { ok: true, mode: 'single', node: expect.stringMatching(/^127\.0\.0\.1:\d+$/) },
        migrations: { ok: true },
        draining: { ok: true },
      },
    });
  });

  it('turns /readyz 503 naming redis while Redis is stopped, /healthz stays 200, and 200 again once it is back', async () => {
    await redis.stop();
    const down = await eventually(async () => {
      const result = await probe(`${h.baseUrl}/readyz`);
      return result.status === 503 ? result : undefined;
    }, 10_000);
    const body = readiness(down);
    expect(body.ready).toBe(false);
    expect(body.components['redis']).toEqual({ ok: false, detail: expect.any(String) });
    expect(body.components['postgres']).toEqual({ ok: true });
    expect(body.components['migrations']).toEqual({ ok: true });
    expect(body.components['draining']).toEqual({ ok: true });
    // Liveness does not depend on Redis: restarting the process would not help.
    expect((await probe(`${h.baseUrl}/healthz`)).status).toBe(200);

    await redis.start();
    const up = await eventually(async () => {
      const result = await probe(`${h.baseUrl}/readyz`);
      return result.status === 200 ? result : undefined;
    }, 15_000);
    expect(readiness(up).components['redis']).toEqual({ ok: true, mode: 'single', node: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
  }, 40_000);
});

describe('metrics and logs of a full run (API + in-process worker + a real task server)', () => {
  const HMAC_KEY = 'ops-hmac-key-do-not-log-4b1d9c';
  const lines: string[] = [];
  // createLogger's options, writing into an array.
  const logger = pino(loggerOptions('debug', 'ops-test'), { write: (line: string) => void lines.push(line) });
  const metrics = new Metrics();
  let h: Harness;
  let worker: RunningWorker;
  let server: RunTaskServer;
  let org: Fixture;
  let teamToken: string;
  let uploadUrl: string;
  let runId: string;
  let resultId: string;

  beforeAll(async () => {
    h = await startHarness({
      ops: true,
      reachableBaseUrl: true,
      logger,
      metrics,
      env: { LOG_LEVEL: 'debug', SWEEPER_INTERVAL_SECONDS: '1' },
    });
    worker = await startWorker({ config: h.config, orm: h.orm, logger, secrets: h.secrets, taskClient: h.taskClient, metrics });
    server = await startRunTaskServer({ hmacKey: HMAC_KEY, mode: 'callback' });

    org = await seedOrganization(h, 'ops-full');
    teamToken = await createTeamToken(h, org.organizationToken, org.teamId);
    expect((await api(h, 'get', '/organizations', teamToken)).status).toBe(200);
    // Creating the task sends the verification request, signed with the HMAC key.
    const taskId = await createTask(h, org, `${server.url}/run-task`, { name: 'ops-task', hmacKey: HMAC_KEY });
    expect(server.requests.filter((request) => request.verification)).toHaveLength(1);
    await attachTask(h, org, org.workspaceId, taskId);

    // A configuration version: its upload URL carries a secret; the upload queues a run.
    const version = await api(h, 'post', `/workspaces/${org.workspaceId}/configuration-versions`, org.organizationToken, {
      data: { type: 'configuration-versions', attributes: {} },
    });
    expect(version.status).toBe(201);
    uploadUrl = String(version.body.data.attributes['upload-url']);
    const upload = await fetch(uploadUrl, { method: 'PUT', body: configurationArchive() });
    expect(upload.status).toBe(200);

    // A failing request, with a request id of the client's choosing.
    const missing = await h.http
      .get('/api/v2/runs/run-doesnotexist0000')
      .set('Authorization', `Bearer ${org.organizationToken}`)
      .set('X-Request-Id', 'ops-failing-request');
    expect(missing.status).toBe(404);

    const runs = await api(h, 'get', `/workspaces/${org.workspaceId}/runs`, org.organizationToken);
    expect(runs.body.data).toHaveLength(1);
    runId = runs.body.data[0].id as string;
    await eventually(
      async () => {
        const run = await api(h, 'get', `/runs/${runId}`, org.organizationToken);
        return run.body.data.attributes.status === 'post_plan_completed' ? true : undefined;
      },
      20_000,
      100,
    );
    const stages = await api(h, 'get', `/runs/${runId}/task-stages?include=task_results`, org.organizationToken);
    expect(stages.body.data.map((stage: { attributes: { status: string } }) => stage.attributes.status)).toEqual(['passed']);
    resultId = stages.body.data[0].relationships['task-results'].data[0].id as string;
    // The task server heard back on its callback (and read the plan with its access token).
    await eventually(async () => {
      const request = server.requests.find((candidate) => !candidate.verification);
      return request?.done && request.callbacks.every((call) => call.status !== null) ? request : undefined;
    });
  }, 60_000);

  afterAll(async () => {
    await worker?.close();
    await server?.close();
    await h?.close();
  }, 30_000);

  it('exposes route templates, job, task request, queue and Node default metrics on /metrics', async () => {
    const text = await eventually(async () => {
      const res = await h.http.get('/metrics');
      const body = res.text;
      const ready =
        /^job_duration_seconds_count\{name="run\.(advance|created)",outcome="completed"\} [1-9]/m.test(body) &&
        /^task_request_duration_seconds_count\{outcome="acknowledged"\} [1-9]/m.test(body);
      return ready ? body : undefined;
    });
    const res = await h.http.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');

    // Every route label is a template of the route table (or "unmatched"), never a concrete path.
    const templates = new Set([...ROUTES.map((route) => `${API_PREFIX}${route.path}`), 'unmatched']);
    const routeLabels = [...text.matchAll(/^http_request_duration_seconds_count\{[^}]*route="([^"]*)"/gm)].map((match) => match[1]);
    expect(routeLabels.length).toBeGreaterThan(0);
    expect(routeLabels.filter((route) => !templates.has(route ?? ''))).toEqual([]);
    expect(routeLabels).toContain('/api/v2/runs/:run_id');
    expect(routeLabels).toContain('/api/v2/task-results/:task_result_id/callback');
    expect(routeLabels).toContain('/api/v2/uploads/configuration-versions/:upload_token');
    expect(text).toMatch(/^http_request_duration_seconds_bucket\{le="[^"]+",method="GET",route="\/api\/v2\/runs\/:run_id",status="200"\}/m);
    // The failing request is counted under its template too.
    expect(text).toMatch(/^http_request_duration_seconds_count\{method="GET",route="\/api\/v2\/runs\/:run_id",status="404"\} [1-9]/m);
    for (const concrete of [runId, resultId, 'run-doesnotexist0000', new URL(uploadUrl).pathname.split('/').at(-1) ?? uploadUrl]) {
      expect(text).not.toContain(concrete);
    }

    expect(text).toMatch(/^job_duration_seconds_bucket\{le="[^"]+",name="run\.created",outcome="completed"\} /m);
    expect(text).toMatch(/^task_request_duration_seconds_sum\{outcome="acknowledged"\} /m);
    for (const state of ['waiting', 'active', 'delayed', 'completed', 'failed']) {
      expect(text).toMatch(new RegExp(`^queue_jobs\\{queue="runs",state="${state}"\\} \\d+`, 'm'));
    }
    expect(text).toMatch(/^queue_jobs\{queue="runs",state="completed"\} [1-9]/m);
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
  });

  it('logs every API request with a request id, worker jobs with their ids, and never a secret', async () => {
    // The worker's last jobs log after the run is final: wait for the dispatch line of our result.
    await eventually(async () => (lines.some((line) => line.includes('"task dispatch"') && line.includes(resultId)) ? true : undefined));
    const text = lines.join('');
    const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);

    const requests = entries.filter((entry) => entry['msg'] === 'request');
    expect(requests.length).toBeGreaterThan(10);
    for (const entry of requests) {
      expect({ line: entry, requestId: typeof entry['requestId'] === 'string' && entry['requestId'].length > 0 }).toEqual({
        line: entry,
        requestId: true,
      });
    }
    expect(requests).toContainEqual(
      expect.objectContaining({ requestId: 'ops-failing-request', method: 'GET', route: '/api/v2/runs/:run_id', status: 404 }),
    );
    const routes = new Set(requests.map((entry) => entry['route']));
    for (const route of [
      '/api/v2/organizations/:organization_name/tasks', // the verification request
      '/api/v2/workspaces/:workspace_id/configuration-versions',
      '/api/v2/uploads/configuration-versions/:upload_token',
      '/api/v2/task-results/:task_result_id/callback',
      '/api/v2/plans/:plan_id/json-output', // the task server reading the plan with its access token
    ]) {
      expect(routes).toContain(route);
    }
    // Request lines name the route template, never the path itself.
    expect(requests.filter((entry) => 'url' in entry || 'path' in entry)).toEqual([]);

    const advanced = entries.filter((entry) => entry['msg'] === 'run advanced');
    const dispatched = entries.filter((entry) => entry['msg'] === 'task dispatch');
    expect(advanced.length).toBeGreaterThan(0);
    expect(dispatched.length).toBeGreaterThan(0);
    for (const entry of advanced) {
      expect(entry).toEqual(expect.objectContaining({ jobId: expect.any(String), jobName: expect.any(String), runId: expect.any(String) }));
    }
    for (const entry of dispatched) {
      expect(entry).toEqual(expect.objectContaining({ jobId: expect.any(String), taskResultId: expect.any(String) }));
    }
    expect(advanced.map((entry) => entry['runId'])).toContain(runId);
    expect(dispatched.map((entry) => entry['taskResultId'])).toContain(resultId);

    const accessTokens = server.requests.filter((request) => !request.verification).map((request) => request.payload?.access_token ?? '');
    expect(accessTokens.length).toBeGreaterThan(0);
    const uploadToken = new URL(uploadUrl).pathname.split('/').at(-1) ?? '';
    const secrets: Record<string, string> = {
      'admin token': h.adminToken,
      'organization token': org.organizationToken,
      'team token': teamToken,
      'HMAC key': HMAC_KEY,
      'upload URL token': uploadToken,
      'secret key': TEST_SECRET_KEY,
      ...Object.fromEntries(accessTokens.map((token, index) => [`access token ${index}`, token])),
    };
    for (const [name, secret] of Object.entries(secrets)) {
      expect(secret.length).toBeGreaterThan(15);
      expect({ name, leaked: text.includes(secret) }).toEqual({ name, leaked: false });
    }
  });
});
