import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JOBS, QUEUES } from '@runtasks/shared/queue';
import { type EnforcementLevel, type RunStage } from '@runtasks/shared/domain';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  startRunTaskServer,
  type RecordedRequest,
  type RunTaskMode,
  type RunTaskPayload,
  type RunTaskServer,
  type TaskResultStatus as TaskServerResult,
} from '../../../examples/run-task-server/server.ts';
import { expectError, uniqueName, UNAUTHORIZED } from '../../../test/support/assertions.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, TEST_SECRET_KEY, type Harness } from '../../../test/support/harness.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';

/**
 * End to end: the API in this process, two worker processes (services/worker/src/main.ts) sharing
 * PostgreSQL and Redis with it, and real task servers (examples/run-task-server) on loopback that
 * are called, acknowledge, read the plan with their access token and call back. Timings come from
 * the environment (4 s progress timeout, 0.2 s retry delays, 0.5 s sweeper), so the file stays fast.
 * The progress timeout ends every stage whose task has not answered in time, so it is also the
 * longest stall of the machine a passing run survives: at 2 s, a four-stage run ended `errored`
 * once under the full suite's load.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PROGRESS_TIMEOUT_SECONDS = 4;
const PROGRESS_TIMEOUT_MS = PROGRESS_TIMEOUT_SECONDS * 1000;
const TIMINGS = {
  TASK_PROGRESS_TIMEOUT_SECONDS: String(PROGRESS_TIMEOUT_SECONDS),
  TASK_RETRY_DELAYS_SECONDS: '0.2,0.2',
  SWEEPER_INTERVAL_SECONDS: '0.5',
};
/** Final for the worker: it never moves a run on from these by itself. */
const TERMINAL = new Set(['errored', 'canceled', 'discarded', 'planned_and_finished', 'post_apply_completed']);
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

interface WorkerProcess {
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

interface RunView {
  id: string;
  status: string;
  timestamps: Record<string, string>;
  warnings: boolean;
  planId: string;
  createdAt: string;
  stageIds: string[];
}

interface StageView {
  id: string;
  stage: RunStage;
  status: string;
  timestamps: Record<string, string>;
  resultIds: string[];
}

interface ResultView {
  id: string;
  status: string;
  taskId: string;
  message: string | null;
  enforcement: EnforcementLevel;
  outcomesCount: number;
  timestamps: Record<string, string>;
}

interface AttemptView {
  attempt: number;
  'http-status': number | null;
  'error-kind': string | null;
}

/** What a task does when called; `refused` and `blocked` are destinations that cannot be delivered to. */
interface TaskSpec {
  mode?: RunTaskMode;
  result?: TaskServerResult;
  enforcement?: EnforcementLevel;
  stages?: RunStage[];
  hmacKey?: string;
  callbackDelayMs?: number;
  readPlan?: boolean;
  destination?: 'refused' | 'blocked';
  /** Put a delaying proxy in front of the task server (a slow network path to it). */
  delayMs?: number;
}

interface TaskSetup {
  taskId: string;
  server: RunTaskServer;
}

describe('orchestration end to end: API + two worker processes + real task servers', () => {
  let h: Harness;
  let org: Fixture;
  let overrideOrg: Fixture;
  let queue: Queue;
  let redis: Redis;
  const workers: WorkerProcess[] = [];
  const servers: RunTaskServer[] = [];
  const proxies: Server[] = [];

  function spawnWorker(): WorkerProcess {
    const child = spawn(process.execPath, ['services/worker/src/main.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env['PATH'] ?? '',
        DATABASE_URL: h.config.databaseUrl,
        REDIS_URL: h.config.redisUrl,
        QUEUE_PREFIX: h.config.queuePrefix,
        SECRET_KEY: TEST_SECRET_KEY,
        PUBLIC_BASE_URL: h.config.publicBaseUrl,
        TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32',
        ...TIMINGS,
        LOG_LEVEL: 'warn',
        // No health/metrics listener: two workers (and other suites) would contend for the default port.
        WORKER_HEALTH_PORT: '0',
      },
    });
    const output: string[] = [];
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    return { child, output, exited };
  }

  /** Polls `check`; on timeout the error carries what the workers printed (they log at warn). */
  async function waitFor<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
    try {
      return await eventually(check, timeoutMs);
    } catch (error) {
      const logs = workers.map((worker, index) => `worker ${index}: ${worker.output.join('').slice(-2000) || '(no output)'}`).join('\n');
      throw new Error(`${what}: ${(error as Error).message}\n${logs}`, { cause: error });
    }
  }

  async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
    return h.orm.em.fork().getConnection().execute<T[]>(query, params);
  }

  async function taskServer(options: Parameters<typeof startRunTaskServer>[0]): Promise<RunTaskServer> {
    const server = await startRunTaskServer(options);
    servers.push(server);
    return server;
  }

  /** Forwards each run task request to `target` after `delayMs` (verification requests at once). */
  async function delayingProxy(target: string, delayMs: number): Promise<string> {
    const proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const verification = body.includes('"access_token":"test-token"');
        const forward = (): void => {
          fetch(target, {
            method: 'POST',
            headers: {
              'content-type': String(req.headers['content-type'] ?? ''),
              'user-agent': String(req.headers['user-agent'] ?? ''),
              'x-tfc-task-signature': String(req.headers['x-tfc-task-signature'] ?? ''),
            },
            body,
          }).then(
            async (response) => res.writeHead(response.status, { 'content-type': 'application/json' }).end(await response.text()),
            () => res.writeHead(502).end(),
          );
        };
        if (verification) forward();
        else setTimeout(forward, delayMs);
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()));
    proxies.push(proxy);
    return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/`;
  }

  /** Run task requests a server received (the verification request at task creation left out). */
  const runRequests = (server: RunTaskServer): RecordedRequest[] => server.requests.filter((request) => !request.verification);
  const payloadOf = (request: RecordedRequest | undefined): RunTaskPayload => {
    if (!request?.payload) throw new Error('no payload recorded');
    return request.payload;
  };

  /** A fresh workspace with one task per spec, each backed by its own task server. */
  async function workspaceWith(owner: Fixture, specs: TaskSpec[]): Promise<{ workspaceId: string; tasks: TaskSetup[] }> {
    const workspaceId = await createWorkspace(h, owner.organization, owner.organizationToken, uniqueName('ws'));
    const tasks: TaskSetup[] = [];
    for (const spec of specs) {
      const server = await taskServer({
        mode: spec.mode ?? 'callback',
        result: spec.result ?? 'passed',
        hmacKey: spec.hmacKey,
        callbackDelayMs: spec.callbackDelayMs,
        readPlan: spec.readPlan,
      });
      const url = spec.delayMs === undefined ? `${server.url}/run-task` : await delayingProxy(`${server.url}/run-task`, spec.delayMs);
      // Created through the API, so the verification request must reach a live server that signs alike.
      const taskId = await createTask(h, owner, url, { hmacKey: spec.hmacKey });
      await attachTask(h, owner, workspaceId, taskId, spec.enforcement, spec.stages);
      // Connection refused: nothing listens there any more.
      if (spec.destination === 'refused') await server.close();
      // A loopback address outside TASK_DESTINATION_ALLOWLIST (127.0.0.1/32): the destination guard refuses it.
      if (spec.destination === 'blocked') {
        await sql(`update run_tasks set url = ? where id = ?`, [`http://127.0.0.2:${server.port}/run-task`, taskId]);
      }
      tasks.push({ taskId, server });
    }
    return { workspaceId, tasks };
  }

  async function getRun(owner: Fixture, runId: string): Promise<RunView> {
    const res = await api(h, 'get', `/runs/${runId}`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`get run: ${res.status} ${res.text}`);
    const data = res.body.data;
    return {
      id: data.id,
      status: data.attributes.status,
      timestamps: data.attributes['status-timestamps'],
      warnings: data.attributes['has-task-warnings'],
      planId: data.relationships.plan.data.id,
      createdAt: data.attributes['created-at'],
      stageIds: (data.relationships['task-stages'].data as { id: string }[]).map((stage) => stage.id),
    };
  }

  async function stagesOf(owner: Fixture, runId: string): Promise<{ stages: StageView[]; results: Map<string, ResultView> }> {
    const res = await api(h, 'get', `/runs/${runId}/task-stages?include=task_results`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`list stages: ${res.status} ${res.text}`);
    type Doc = { id: string; type: string; attributes: Record<string, unknown>; relationships: Record<string, { data: unknown }> };
    const stages = (res.body.data as Doc[]).map((doc) => ({
      id: doc.id,
      stage: doc.attributes['stage'] as RunStage,
      status: doc.attributes['status'] as string,
      timestamps: doc.attributes['status-timestamps'] as Record<string, string>,
      resultIds: (doc.relationships['task-results']?.data as { id: string }[]).map((result) => result.id),
    }));
    const results = new Map<string, ResultView>();
    for (const doc of (res.body.included ?? []) as Doc[]) {
      if (doc.type !== 'task-results') continue;
      results.set(doc.id, {
        id: doc.id,
        status: doc.attributes['status'] as string,
        taskId: doc.attributes['task-id'] as string,
        message: doc.attributes['message'] as string | null,
        enforcement: doc.attributes['workspace-task-enforcement-level'] as EnforcementLevel,
        outcomesCount: doc.attributes['task-result-outcomes-count'] as number,
        timestamps: doc.attributes['status-timestamps'] as Record<string, string>,
      });
    }
    return { stages, results };
  }

  async function stageOf(owner: Fixture, runId: string, stage: RunStage): Promise<{ stage: StageView; results: ResultView[] }> {
    const { stages, results } = await stagesOf(owner, runId);
    const found = stages.find((candidate) => candidate.stage === stage);
    if (!found) throw new Error(`run ${runId} has no ${stage} stage`);
    return { stage: found, results: found.resultIds.map((id) => results.get(id) as ResultView) };
  }

  async function getResult(owner: Fixture, resultId: string): Promise<ResultView> {
    const res = await api(h, 'get', `/task-results/${resultId}`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`get result: ${res.status} ${res.text}`);
    const attributes = res.body.data.attributes;
    return {
      id: res.body.data.id,
      status: attributes.status,
      taskId: attributes['task-id'],
      message: attributes.message,
      enforcement: attributes['workspace-task-enforcement-level'],
      outcomesCount: attributes['task-result-outcomes-count'],
      timestamps: attributes['status-timestamps'],
    };
  }

  async function attemptsOf(owner: Fixture, resultId: string): Promise<AttemptView[]> {
    const res = await api(h, 'get', `/task-results/${resultId}/delivery-attempts`, owner.organizationToken);
    if (res.status !== 200) throw new Error(`delivery attempts: ${res.status} ${res.text}`);
    return (res.body.data as { attributes: AttemptView }[]).map(({ attributes }) => ({
      attempt: attributes.attempt,
      'http-status': attributes['http-status'],
      'error-kind': attributes['error-kind'],
    }));
  }

  /**
   * Waits until the run reaches `expected`, or stops early on a status it cannot leave by itself
   * (`leaving`: a status a person just moved it out of, which the workers have yet to act on).
   */
  async function runReaches(owner: Fixture, runId: string, expected: string, leaving?: string): Promise<RunView> {
    const run = await waitFor(async () => {
      const current = await getRun(owner, runId);
      const stuck = TERMINAL.has(current.status) || (current.status.endsWith('_awaiting_decision') && current.status !== leaving);
      return current.status === expected || stuck ? current : undefined;
    }, `run ${runId} to reach ${expected}`);
    expect(run.status).toBe(expected);
    return run;
  }

  async function resultReaches(owner: Fixture, resultId: string, expected: string): Promise<ResultView> {
    const result = await waitFor(async () => {
      const current = await getResult(owner, resultId);
      return current.status === expected || !['pending', 'running'].includes(current.status) ? current : undefined;
    }, `result ${resultId} to reach ${expected}`);
    expect(result.status).toBe(expected);
    return result;
  }

  /** The request a server received, once it has answered it. */
  const answeredRequest = (server: RunTaskServer, index = 0): Promise<RecordedRequest> =>
    waitFor(async () => {
      const request = runRequests(server)[index];
      return request?.status !== undefined ? request : undefined;
    }, `task server request ${index} to be answered`);

  /** Every callback the server meant to make has an answer. */
  const callbacksAnswered = (server: RunTaskServer, count: number): Promise<RecordedRequest> =>
    waitFor(async () => {
      const request = runRequests(server)[0];
      const calls = request?.callbacks ?? [];
      return calls.length >= count && calls.every((call) => call.status !== null || call.error !== undefined) ? request : undefined;
    }, `${count} callback(s) answered`);

  function callback(resultId: string, token: string | undefined, body: unknown) {
    let req = h.http.patch(`/api/v2/task-results/${resultId}/callback`).set('Content-Type', 'application/vnd.api+json');
    if (token !== undefined) req = req.set('Authorization', `Bearer ${token}`);
    return req.send(JSON.stringify(body));
  }

  const verdict = (status: string, extra: Record<string, unknown> = {}) => ({
    data: { type: 'task-results', attributes: { status, message: `reported ${status}`, ...extra } },
  });

  /** GET an absolute URL (as a task server would) with a bearer token. */
  async function getWithToken(url: string, token: string): Promise<{ status: number; body: unknown }> {
    const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON
    }
    return { status: response.status, body };
  }

  beforeAll(async () => {
    h = await startHarness({ reachableBaseUrl: true, env: { ...TIMINGS } });
    org = await seedOrganization(h, uniqueName('e2e'));
    overrideOrg = await seedOrganization(h, uniqueName('e2e-override'));
    const enabled = await api(h, 'patch', `/organizations/${overrideOrg.organization}`, overrideOrg.organizationToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    });
    expect(enabled.status).toBe(200);
    expect(enabled.body.data.attributes['task-overrides-enabled']).toBe(true);
    redis = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    queue = new Queue(QUEUES.runs, { connection: redis, prefix: h.config.queuePrefix });
    workers.push(spawnWorker(), spawnWorker());
    // Both processes are consuming the queue before any run is created.
    await waitFor(async () => ((await queue.getWorkersCount()) >= 2 ? true : undefined), 'two workers to connect', 20_000);
  }, 40_000);

  afterAll(async () => {
    for (const worker of workers) worker.child.kill('SIGTERM');
    const exits = await Promise.all(workers.map((worker) => worker.exited));
    await Promise.all(servers.map((server) => server.close()));
    for (const proxy of proxies) proxy.closeAllConnections();
    await Promise.all(proxies.map((proxy) => new Promise<void>((resolve) => proxy.close(() => resolve()))));
    await queue?.close();
    redis?.disconnect();
    await h?.close();
    // A worker stops cleanly on SIGTERM (closes its queue, relay and database pool, exits 0).
    expect(exits).toEqual(workers.map(() => ({ code: 0, signal: null })));
  }, 30_000);

  it('runs two tasks on post_plan as one stage holding two results, each task getting its own result id', async () => {
    const { workspaceId, tasks } = await workspaceWith(org, [{}, { enforcement: 'advisory' }]);
    const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
    await runReaches(org, runId, 'post_plan_completed');
    const { stages, results } = await stagesOf(org, runId);
    expect(stages.map((stage) => [stage.stage, stage.status])).toEqual([['post_plan', 'passed']]);
    const resultIds = stages[0]?.resultIds ?? [];
    expect(resultIds).toHaveLength(2);
    for (const { taskId, server } of tasks) {
      const result = [...results.values()].find((candidate) => candidate.taskId === taskId);
      expect(result?.status).toBe('passed');
      expect(runRequests(server)).toHaveLength(1);
      const payload = payloadOf(runRequests(server)[0]);
      expect(payload.task_result_id).toBe(result?.id);
      expect(payload.task_result_callback_url).toBe(`${h.config.publicBaseUrl}/api/v2/task-results/${result?.id}/callback`);
    }
    expect(new Set(tasks.map(({ server }) => payloadOf(runRequests(server)[0]).access_token)).size).toBe(2);
  });

  describe('stage and run status for every enforcement × outcome', () => {
    type Outcome = 'passed' | 'failed' | 'non-200' | 'no callback' | 'connection refused' | 'blocked destination';
    const OUTCOMES: Record<Outcome, { spec: TaskSpec; result: string; attempts: AttemptView[] }> = {
      passed: { spec: { result: 'passed' }, result: 'passed', attempts: [{ attempt: 1, 'http-status': 200, 'error-kind': null }] },
      failed: { spec: { result: 'failed' }, result: 'failed', attempts: [{ attempt: 1, 'http-status': 200, 'error-kind': null }] },
      'non-200': {
        spec: { mode: 'status:503' },
        result: 'errored',
        attempts: [1, 2, 3].map((attempt) => ({ attempt, 'http-status': 503, 'error-kind': null })),
      },
      'no callback': {
        spec: { mode: 'no-callback' },
        result: 'errored',
        attempts: [{ attempt: 1, 'http-status': 200, 'error-kind': null }],
      },
      'connection refused': {
        spec: { destination: 'refused' },
        result: 'unreachable',
        attempts: [1, 2, 3].map((attempt) => ({ attempt, 'http-status': null, 'error-kind': 'refused' })),
      },
      'blocked destination': {
        spec: { destination: 'blocked' },
        result: 'unreachable',
        // Retrying cannot help a destination refused by policy: one attempt.
        attempts: [{ attempt: 1, 'http-status': null, 'error-kind': 'blocked' }],
      },
    };
    const cases = (['mandatory', 'advisory'] as const).flatMap((enforcement) =>
      (Object.keys(OUTCOMES) as Outcome[]).map((outcome) => ({ enforcement, outcome })),
    );

    it.concurrent.each(cases)('$enforcement task, $outcome', async ({ enforcement, outcome }) => {
      const expected = OUTCOMES[outcome];
      const { workspaceId, tasks } = await workspaceWith(org, [{ ...expected.spec, enforcement }]);
      const server = (tasks[0] as TaskSetup).server;
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
      const [resultId] = (await stageOf(org, runId, 'post_plan')).stage.resultIds;
      const result = await resultReaches(org, resultId as string, expected.result);
      expect(result.enforcement).toBe(enforcement);
      expect(result.timestamps[`${expected.result}-at`]).toMatch(RFC3339);
      if (expected.result !== 'passed' && expected.result !== 'failed') expect(result.message).toEqual(expect.any(String));

      const blocks = enforcement === 'mandatory' && outcome !== 'passed';
      const run = await runReaches(org, runId, blocks ? 'errored' : 'post_plan_completed');
      // A mandatory failure is the stage's status; advisory failures only warn.
      const { stage } = await stageOf(org, runId, 'post_plan');
      expect(stage.status).toBe(blocks ? expected.result : 'passed');
      expect(run.warnings).toBe(enforcement === 'advisory' && outcome !== 'passed');
      expect(run.timestamps['post-plan-running-at']).toMatch(RFC3339);
      if (blocks) expect(run.timestamps['post-plan-completed-at']).toBeUndefined();

      expect(await attemptsOf(org, resultId as string)).toEqual(expected.attempts);
      // Every recorded attempt that got an answer is a request the task server received, and no more.
      const delivered = expected.attempts.filter((attempt) => attempt['http-status'] !== null).length;
      expect(runRequests(server)).toHaveLength(delivered);
      for (const request of runRequests(server)) expect(payloadOf(request).task_result_id).toBe(resultId);

      if (outcome === 'no callback') {
        // The task wakes up after the progress timeout ended it: too late, and nothing changes.
        const late = await callback(resultId as string, payloadOf(runRequests(server)[0]).access_token, verdict('passed'));
        expectError(late, 409);
        expect(late.body.errors[0].title).toBe('transition not allowed');
        expect((await getResult(org, resultId as string)).status).toBe('errored');
        expect((await getRun(org, runId)).status).toBe(run.status);
      }
    });
  });

  describe('run lifecycle across the four stages', () => {
    const ALL_STAGES: RunStage[] = ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'];
    const ORDER: RunStage[] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];

    it('gives a run with tasks on every stage four stages in lifecycle order; auto-apply reaches post_apply_completed', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [{ stages: ALL_STAGES }]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
      // The stages exist, pending, as soon as the run does.
      const created = await getRun(org, runId);
      expect(created.stageIds).toHaveLength(4);
      const run = await runReaches(org, runId, 'post_apply_completed');
      const { stages, results } = await stagesOf(org, runId);
      expect(stages.map((stage) => stage.stage)).toEqual(ORDER);
      expect(stages.map((stage) => stage.id)).toEqual(run.stageIds);
      expect(stages.map((stage) => stage.status)).toEqual(['passed', 'passed', 'passed', 'passed']);
      expect([...results.values()].map((result) => result.status)).toEqual(['passed', 'passed', 'passed', 'passed']);
      // Dispatched one stage after the other, in lifecycle order.
      const server = (tasks[0] as TaskSetup).server;
      expect(runRequests(server).map((request) => payloadOf(request).stage)).toEqual(ORDER);
      const passedAt = stages.map((stage) => Date.parse(stage.timestamps['passed-at'] ?? ''));
      expect([...passedAt].sort((a, b) => a - b)).toEqual(passedAt);
      for (const key of [
        'pre-plan-running-at',
        'pre-plan-completed-at',
        'planning-at',
        'planned-at',
        'post-plan-running-at',
        'post-plan-completed-at',
        'confirmed-at',
        'pre-apply-running-at',
        'pre-apply-completed-at',
        'applying-at',
        'applied-at',
        'post-apply-running-at',
        'post-apply-completed-at',
      ]) {
        expect([key, run.timestamps[key]]).toEqual([key, expect.stringMatching(RFC3339)]);
      }
      expect(Date.parse(run.timestamps['applied-at'] ?? '')).toBeLessThanOrEqual(Date.parse(run.timestamps['post-apply-running-at'] ?? ''));
      expect(run.warnings).toBe(false);
    });

    it('holds a run without auto-apply at post_plan_completed until POST /runs/:id/actions/apply', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [{ stages: ALL_STAGES }]);
      const server = (tasks[0] as TaskSetup).server;
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(org, runId, 'post_plan_completed');
      const reachedAt = Date.now();
      // Wait for proof that a worker looked at the run again and left it: a sweep that began when the run had
      // been idle for longer than the sweeper's grace (1 s here) judged it waiting for a person and woke nothing.
      await waitFor(async () => {
        const jobs = await queue.getJobs(['completed'], 0, 199);
        return jobs.some((job) => job.name === JOBS.sweep && (job.processedOn ?? 0) > reachedAt + 2_000) ? true : undefined;
      }, 'a sweep with the waiting run idle');
      const wakeUps = (await queue.getJobs(['completed', 'active', 'waiting', 'delayed'], 0, 999)).filter(
        (job) => job.name === JOBS.runAdvance && (job.data as { runId?: string }).runId === runId && job.timestamp > reachedAt,
      );
      expect(wakeUps).toEqual([]);
      const waiting = await getRun(org, runId);
      expect(waiting.status).toBe('post_plan_completed');
      expect(waiting.timestamps['confirmed-at']).toBeUndefined();
      const { stages } = await stagesOf(org, runId);
      expect(stages.map((stage) => stage.status)).toEqual(['passed', 'passed', 'pending', 'pending']);
      expect(runRequests(server).map((request) => payloadOf(request).stage)).toEqual(['pre_plan', 'post_plan']);

      const apply = await api(h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken, { comment: 'ship it' });
      expect(apply.status).toBe(202);
      const run = await runReaches(org, runId, 'post_apply_completed');
      expect(run.timestamps['confirmed-at']).toMatch(RFC3339);
      expect(runRequests(server).map((request) => payloadOf(request).stage)).toEqual(ORDER);
      expect((await stagesOf(org, runId)).stages.map((stage) => stage.status)).toEqual(['passed', 'passed', 'passed', 'passed']);
    });

    it('does not let a failed mandatory post_apply task block: post_apply_completed with warnings', async () => {
      const { workspaceId } = await workspaceWith(org, [{ stages: ['post_apply'], enforcement: 'mandatory', result: 'failed' }]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
      const run = await runReaches(org, runId, 'post_apply_completed');
      expect(run.warnings).toBe(true);
      expect(run.timestamps['applied-at']).toMatch(RFC3339);
      const { stage, results } = await stageOf(org, runId, 'post_apply');
      expect(stage.status).toBe('passed');
      expect(results.map((result) => [result.enforcement, result.status])).toEqual([['mandatory', 'failed']]);
    });

    it('errors the run on a blocking pre_apply stage: no apply, no post_apply dispatch', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [
        { stages: ['pre_apply'], enforcement: 'mandatory', result: 'failed' },
        { stages: ['post_apply'], enforcement: 'advisory' },
      ]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
      const run = await runReaches(org, runId, 'errored');
      expect(run.timestamps['pre-apply-running-at']).toMatch(RFC3339);
      expect(run.timestamps['pre-apply-completed-at']).toBeUndefined();
      expect(run.timestamps['applying-at']).toBeUndefined();
      expect(run.timestamps['applied-at']).toBeUndefined();
      expect(run.timestamps['post-apply-running-at']).toBeUndefined();
      expect((await stageOf(org, runId, 'pre_apply')).stage.status).toBe('failed');
      // The post_apply result was never started (the decision to stop was taken in the same transaction),
      // and ends canceled with the run rather than staying pending forever.
      const postApply = await stageOf(org, runId, 'post_apply');
      expect(postApply.stage.status).toBe('canceled');
      expect(postApply.results.map((result) => result.status)).toEqual(['canceled']);
      expect(await attemptsOf(org, postApply.results[0]?.id as string)).toEqual([]);
      expect(runRequests((tasks[1] as TaskSetup).server)).toEqual([]);
    });

    it('gives a plan-only run no pre_apply/post_apply stages; it ends planned_and_finished', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [{ stages: ALL_STAGES }]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'plan-only': true });
      const run = await runReaches(org, runId, 'planned_and_finished');
      const { stages } = await stagesOf(org, runId);
      expect(stages.map((stage) => [stage.stage, stage.status])).toEqual([
        ['pre_plan', 'passed'],
        ['post_plan', 'passed'],
      ]);
      expect(run.timestamps['confirmed-at']).toBeUndefined();
      const server = (tasks[0] as TaskSetup).server;
      expect(runRequests(server).map((request) => [payloadOf(request).stage, payloadOf(request).is_speculative])).toEqual([
        ['pre_plan', true],
        ['post_plan', true],
      ]);
    });
  });

  describe('override, discard and cancel', () => {
    it('holds a failed mandatory post_plan stage for an override; overriding lets the run continue', async () => {
      const { workspaceId } = await workspaceWith(overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(h, overrideOrg.organizationToken, workspaceId, { 'auto-apply': true });
      await runReaches(overrideOrg, runId, 'post_plan_awaiting_decision');
      const { stage, results } = await stageOf(overrideOrg, runId, 'post_plan');
      expect(stage.status).toBe('awaiting_override');
      expect(results.map((result) => result.status)).toEqual(['failed']);

      const overridden = await api(h, 'post', `/task-stages/${stage.id}/actions/override`, overrideOrg.organizationToken, {
        comment: 'accepted risk',
      });
      expect(overridden.status).toBe(200);
      expect(overridden.body.data.id).toBe(stage.id);
      expect(overridden.body.data.attributes.status).toBe('running');
      expect(overridden.body.data.attributes['status-timestamps']['awaiting-override-at']).toMatch(RFC3339);

      const run = await runReaches(overrideOrg, runId, 'applied', 'post_plan_awaiting_decision');
      const after = await stageOf(overrideOrg, runId, 'post_plan');
      expect(after.stage.status).toBe('passed');
      // The verdict stays what the task said; the run carries the warning.
      expect(after.results.map((result) => result.status)).toEqual(['failed']);
      expect(run.warnings).toBe(true);
      expect(run.timestamps['post-plan-completed-at']).toMatch(RFC3339);
      // Not awaiting any more: a second override is refused.
      const again = await api(h, 'post', `/task-stages/${stage.id}/actions/override`, overrideOrg.organizationToken, {});
      expectError(again, 409);
      expect(again.body.errors[0].title).toBe('transition not allowed');
    });

    it('never holds a speculative (plan-only) run: it errors', async () => {
      const { workspaceId } = await workspaceWith(overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(h, overrideOrg.organizationToken, workspaceId, { 'plan-only': true });
      await runReaches(overrideOrg, runId, 'errored');
      expect((await stageOf(overrideOrg, runId, 'post_plan')).stage.status).toBe('failed');
    });

    it('discards a run awaiting a decision: run discarded, stage canceled', async () => {
      const { workspaceId } = await workspaceWith(overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(h, overrideOrg.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(overrideOrg, runId, 'post_plan_awaiting_decision');
      const discard = await api(h, 'post', `/runs/${runId}/actions/discard`, overrideOrg.organizationToken);
      expect(discard.status).toBe(202);
      const run = await runReaches(overrideOrg, runId, 'discarded');
      expect(run.timestamps['discarded-at']).toMatch(RFC3339);
      const { stage, results } = await stageOf(overrideOrg, runId, 'post_plan');
      expect(stage.status).toBe('canceled');
      expect(results.map((result) => result.status)).toEqual(['failed']);
      expectError(await api(h, 'post', `/task-stages/${stage.id}/actions/override`, overrideOrg.organizationToken, {}), 409);
    });

    it('cancels a run while a task has acknowledged but not called back; the later callback gets 409', async () => {
      // The callback comes well inside the progress window, late enough for the cancel to come first.
      const { workspaceId, tasks } = await workspaceWith(org, [{ callbackDelayMs: 0.75 * PROGRESS_TIMEOUT_MS, readPlan: false }]);
      const server = (tasks[0] as TaskSetup).server;
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
      const request = await answeredRequest(server);
      expect(request.status).toBe(200);
      expect(request.callbacks).toEqual([]);
      const cancel = await api(h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken);
      expect(cancel.status).toBe(202);
      const run = await runReaches(org, runId, 'canceled');
      const resultId = payloadOf(request).task_result_id;
      const before = await getResult(org, resultId);
      expect(before.status).toBe('canceled');
      expect((await stageOf(org, runId, 'post_plan')).stage.status).toBe('canceled');

      // The task finishes its work and reports: too late.
      const answered = await callbacksAnswered(server, 1);
      expect(answered.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 409]]);
      expect(await getResult(org, resultId)).toEqual(before);
      expect((await getRun(org, runId)).status).toBe(run.status);
      expect((await stageOf(org, runId, 'post_plan')).stage.status).toBe('canceled');
    });
  });

  describe('callbacks and deadlines with real task servers', () => {
    it('refuses a duplicate final callback: first 200, second 409', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [{ mode: 'double-callback' }]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(org, runId, 'post_plan_completed');
      const request = await callbacksAnswered((tasks[0] as TaskSetup).server, 2);
      expect(request.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([
        ['passed', 200],
        ['passed', 409],
      ]);
      // The outcome of the refused duplicate was not stored twice.
      expect((await getResult(org, payloadOf(request).task_result_id)).outcomesCount).toBe(1);
    });

    it('accepts a callback that arrives before the POST is acknowledged', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [{ mode: 'callback-before-ack' }]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(org, runId, 'post_plan_completed');
      const request = await answeredRequest((tasks[0] as TaskSetup).server);
      expect(request.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 200]]);
      const resultId = payloadOf(request).task_result_id;
      expect((await getResult(org, resultId)).status).toBe('passed');
      expect(await attemptsOf(org, resultId)).toEqual([{ attempt: 1, 'http-status': 200, 'error-kind': null }]);
    });

    it('extends the deadline on a running progress callback; the same task without progress times out', async () => {
      // A slow path to the task (3 s) puts its callbacks late in the 4 s progress window: the final
      // verdict comes ~5.4 s after the stage started, past the first deadline.
      const slow = { delayMs: 0.75 * PROGRESS_TIMEOUT_MS, callbackDelayMs: 0.6 * PROGRESS_TIMEOUT_MS, readPlan: false };
      const progressing = await workspaceWith(org, [{ ...slow, mode: 'progress' }]);
      const silent = await workspaceWith(org, [{ ...slow, mode: 'callback' }]);
      const progressRun = await createRun(h, org.organizationToken, progressing.workspaceId, { 'auto-apply': false });
      const silentRun = await createRun(h, org.organizationToken, silent.workspaceId, { 'auto-apply': false });

      await runReaches(org, progressRun, 'post_plan_completed');
      const progressRequest = await callbacksAnswered((progressing.tasks[0] as TaskSetup).server, 2);
      expect(progressRequest.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([
        ['running', 200],
        ['passed', 200],
      ]);
      const progressId = payloadOf(progressRequest).task_result_id;
      const [row] = await sql<{ progress_deadline: Date | string }>(`select progress_deadline from task_results where id = ?`, [
        progressId,
      ]);
      const result = await getResult(org, progressId);
      const startedAt = Date.parse(result.timestamps['running-at'] ?? '');
      // Without the progress callback the deadline was startedAt + 2 s; the verdict came after it.
      expect(Date.parse(result.timestamps['passed-at'] ?? '') - startedAt).toBeGreaterThan(PROGRESS_TIMEOUT_MS);
      expect(new Date(row?.progress_deadline ?? 0).getTime() - startedAt).toBeGreaterThan(PROGRESS_TIMEOUT_MS);

      // The control: same timings, no progress → errored at the deadline, and its verdict is refused.
      await runReaches(org, silentRun, 'errored');
      const silentRequest = await callbacksAnswered((silent.tasks[0] as TaskSetup).server, 1);
      expect(silentRequest.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 409]]);
      const silentResult = await getResult(org, payloadOf(silentRequest).task_result_id);
      expect(silentResult.status).toBe('errored');
      expect(silentResult.outcomesCount).toBe(0);
      expect((await stageOf(org, silentRun, 'post_plan')).stage.status).toBe('errored');
    });
  });

  describe('the run task request', () => {
    it('carries every payload v1 field, signed over the exact bytes (checked with openssl)', async () => {
      const hmacKey = 'e2e-hmac-key-0123456789';
      const planJson = { format_version: '1.2', terraform_version: '1.9.0', resource_changes: [], planned_values: { root_module: {} } };
      const { workspaceId, tasks } = await workspaceWith(org, [
        { hmacKey, stages: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'], enforcement: 'advisory' },
      ]);
      const workspace = (await api(h, 'get', `/workspaces/${workspaceId}`, org.organizationToken)).body.data;
      const runId = await createRun(h, org.organizationToken, workspaceId, {
        'auto-apply': true,
        message: 'payload check',
        'plan-json': planJson,
      });
      const run = await runReaches(org, runId, 'post_apply_completed');
      const { stages } = await stagesOf(org, runId);
      const server = (tasks[0] as TaskSetup).server;
      const requests = runRequests(server);
      expect(requests.map((request) => payloadOf(request).stage)).toEqual(['pre_plan', 'post_plan', 'pre_apply', 'post_apply']);
      const base = h.config.publicBaseUrl;
      for (const request of requests) {
        const payload = payloadOf(request);
        const stage = stages.find((candidate) => candidate.stage === payload.stage) as StageView;
        expect(request.method).toBe('POST');
        expect(request.path).toBe('/run-task');
        expect(request.headers['content-type']).toBe('application/json');
        expect(request.headers['user-agent']).toMatch(/runtasks/i);
        // Signature: lowercase hex HMAC-SHA512 of the raw bytes, computed independently.
        expect(request.headers['x-tfc-task-signature']).toBe(opensslHmac(hmacKey, Buffer.from(request.body, 'utf8')));
        expect(request.signatureVerified).toBe(true);
        // Compact JSON: the bytes are exactly JSON.stringify of what they parse to.
        expect(request.body).toBe(JSON.stringify(JSON.parse(request.body)));

        expect(payload).toEqual(
          expect.objectContaining({
            payload_version: 1,
            stage: stage.stage,
            access_token: expect.any(String),
            capabilities: { outcomes: true },
            is_speculative: false,
            organization_name: org.organization,
            run_created_at: expect.stringMatching(RFC3339),
            run_created_by: expect.any(String),
            run_id: runId,
            run_message: 'payload check',
            task_result_callback_url: `${base}/api/v2/task-results/${stage.resultIds[0]}/callback`,
            task_result_enforcement_level: 'advisory',
            task_result_id: stage.resultIds[0],
            vcs_branch: null,
            vcs_commit_url: null,
            vcs_commit_hash: null,
            vcs_pull_request_url: null,
            vcs_repo_url: null,
            workspace_id: workspaceId,
            workspace_name: workspace.attributes.name,
            workspace_working_directory: expect.any(String),
          }),
        );
        for (const field of ['configuration_version_download_url', 'configuration_version_id', 'run_app_url', 'workspace_app_url']) {
          expect(payload).toHaveProperty(field);
        }
        // No configuration version was given: both are null, consistently.
        expect([payload['configuration_version_id'], payload['configuration_version_download_url']]).toEqual([null, null]);
        expect(payload.access_token).not.toBe('test-token');
        expect((payload.access_token as string).length).toBeGreaterThanOrEqual(20);
        expect(Date.parse(payload['run_created_at'] as string)).toBe(Date.parse(run.createdAt));
        expect(payload['run_created_by']).not.toBe('');
        const workspaceAppUrl = payload['workspace_app_url'] as string;
        expect(workspaceAppUrl.startsWith(`${base}/app/${org.organization}/`)).toBe(true);
        expect(workspaceAppUrl.endsWith(`/${workspace.attributes.name}`)).toBe(true);
        expect(payload['run_app_url']).toBe(`${workspaceAppUrl}/runs/${runId}`);
        if (stage.stage === 'pre_plan') {
          expect(Object.keys(payload)).not.toContain('plan_json_api_url');
          expect(request.plan).toBeUndefined();
        } else {
          expect(payload.plan_json_api_url).toBe(`${base}/api/v2/plans/${run.planId}/json-output`);
          // The task server read the plan with its access token.
          expect(request.plan?.status).toBe(200);
        }
        expect(request.callbacks.map((call) => call.status)).toEqual([200]);
      }
      // One token per result.
      expect(new Set(requests.map((request) => payloadOf(request).access_token)).size).toBe(4);
    });
  });

  describe('the access token and the callback API', () => {
    it('reads its own run plan only, nothing else, and dies when the result is final', async () => {
      const planJson = { format_version: '1.2', terraform_version: '1.9.1', resource_changes: [{ address: 'null_resource.x' }] };
      const mine = await workspaceWith(org, [{ mode: 'no-callback' }]);
      const other = await workspaceWith(org, [{}]);
      const runId = await createRun(h, org.organizationToken, mine.workspaceId, { 'auto-apply': false, 'plan-json': planJson });
      const otherRunId = await createRun(h, org.organizationToken, other.workspaceId, { 'auto-apply': false });
      const otherRun = await getRun(org, otherRunId);
      const request = await answeredRequest((mine.tasks[0] as TaskSetup).server);
      const payload = payloadOf(request);
      const token = payload.access_token;
      // Progress first, so the checks below run well inside the (short) progress window.
      expect((await callback(payload.task_result_id, token, verdict('running'))).status).toBe(200);

      const own = await getWithToken(payload.plan_json_api_url as string, token);
      expect(own).toEqual({ status: 200, body: planJson });
      expect((await getWithToken(`${h.config.publicBaseUrl}/api/v2/runs/${runId}/plan/json-output`, token)).status).toBe(200);
      // Another run's plan: not found, by either path.
      const foreign = await getWithToken(`${h.config.publicBaseUrl}/api/v2/plans/${otherRun.planId}/json-output`, token);
      expect(foreign.status).toBe(404);
      expect((await getWithToken(`${h.config.publicBaseUrl}/api/v2/runs/${otherRunId}/plan/json-output`, token)).status).toBe(404);
      // Any other endpoint: unauthorized.
      for (const path of [
        `/runs/${runId}`,
        `/task-results/${payload.task_result_id}`,
        `/workspaces/${mine.workspaceId}`,
        '/organizations',
      ]) {
        const res = await api(h, 'get', path, token);
        expect([path, res.status, res.body]).toEqual([path, 401, UNAUTHORIZED]);
      }

      expect((await callback(payload.task_result_id, token, verdict('passed'))).status).toBe(200);
      const dead = await getWithToken(payload.plan_json_api_url as string, token);
      expect(dead).toEqual({ status: 401, body: UNAUTHORIZED });
      await runReaches(org, runId, 'post_plan_completed');
    });

    it('answers 401 to a wrong or foreign token, 422 to a bad status, and stores outcomes in all three shapes', async () => {
      const { workspaceId, tasks } = await workspaceWith(org, [{ mode: 'no-callback' }, { mode: 'no-callback' }]);
      const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
      const first = payloadOf(await answeredRequest((tasks[0] as TaskSetup).server));
      const second = payloadOf(await answeredRequest((tasks[1] as TaskSetup).server));
      const resultId = first.task_result_id;
      expect((await callback(resultId, first.access_token, verdict('running'))).status).toBe(200);

      const wrong = await callback(resultId, `rtcb_${'x'.repeat(43)}`, verdict('passed'));
      expect([wrong.status, wrong.body]).toEqual([401, UNAUTHORIZED]);
      const foreign = await callback(resultId, second.access_token, verdict('passed'));
      expect([foreign.status, foreign.body]).toEqual([401, UNAUTHORIZED]);
      const missing = await callback(resultId, undefined, verdict('passed'));
      expect([missing.status, missing.body]).toEqual([401, UNAUTHORIZED]);
      for (const status of ['errored', 'canceled', 'pending']) {
        expectError(await callback(resultId, first.access_token, verdict(status)), 422, '/data/attributes/status');
      }
      expect((await getResult(org, resultId)).status).toBe('running');

      const outcome = (id: string) => ({
        'outcome-id': id,
        description: `finding ${id}`,
        body: `## ${id}`,
        url: `https://tasks.example.test/${id}`,
        tags: { Severity: [{ label: 'High', level: 'error' }] },
      });
      const shapes = [
        verdict('running', {}),
        verdict('running', {}),
        { data: { type: 'task-results', attributes: { status: 'passed', message: 'all good', outcomes: [outcome('OUT-3')] } } },
      ];
      (shapes[0] as { data: Record<string, unknown> }).data['relationships'] = {
        outcomes: { data: [{ type: 'task-result-outcomes', attributes: outcome('OUT-1') }] },
      };
      (shapes[1] as { data: Record<string, unknown> }).data['relationships'] = {
        'task-result-outcomes': { data: [{ type: 'task-result-outcomes', attributes: outcome('OUT-2') }] },
      };
      for (const body of shapes) {
        const res = await callback(resultId, first.access_token, body);
        expect([res.status, res.body.data?.id]).toEqual([200, resultId]);
      }
      const listed = await api(h, 'get', `/task-results/${resultId}/outcomes`, org.organizationToken);
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((item: { attributes: Record<string, unknown> }) => item.attributes['outcome-id'])).toEqual([
        'OUT-1',
        'OUT-2',
        'OUT-3',
      ]);
      expect(listed.body.data[2].attributes).toEqual(
        expect.objectContaining({
          description: 'finding OUT-3',
          body: '## OUT-3',
          tags: { Severity: [{ label: 'High', level: 'error' }] },
        }),
      );
      const result = await getResult(org, resultId);
      expect([result.status, result.message, result.outcomesCount]).toEqual(['passed', 'all good', 3]);

      expect((await callback(second.task_result_id, second.access_token, verdict('passed'))).status).toBe(200);
      await runReaches(org, runId, 'post_plan_completed');
    });
  });
});
