import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { openOrm } from '@runtasks/shared/db';
import { JOBS } from '@runtasks/shared/queue';
import { Redis } from 'ioredis';
import { startWorker, type RunningWorker } from '../../services/worker/src/worker.ts';
import { uniqueName } from '../support/assertions.ts';
import { recordFigures } from '../support/figures.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  seedOrganization,
  type Fixture,
} from '../support/fixtures.ts';
import { startHarness, type Harness } from '../support/harness.ts';
import { expectNoViolations } from '../support/invariants.ts';
import {
  afterTeardown,
  callBack,
  finalKeys,
  hmac,
  SETTLED,
  startScriptedServer,
  type Responder,
  type ScriptedServer,
} from '../support/scripted-server.ts';

/**
 * Lifecycle races: concurrent overrides of one stage, a task changed
 * or removed while its results are in flight, and three workers ending the same expired results.
 * The API and the workers run in this process on a cloned database and a queue prefix of their own;
 * task servers are small node:http listeners on loopback that record every request.
 */

const SUITE = 'races';
const TIMINGS = {
  TASK_PROGRESS_TIMEOUT_SECONDS: '20',
  TASK_MAX_RUNTIME_SECONDS: '60',
  TASK_RETRY_DELAYS_SECONDS: '0.2,0.2',
  SWEEPER_INTERVAL_SECONDS: '0.5',
};

interface ResultRow {
  id: string;
  status: string;
  status_timestamps: Record<string, string>;
  version: number;
  task_url: string;
}

/** `?, ?, …` for an `in (…)` list (one placeholder per value). */
const inList = (values: readonly unknown[]): string => values.map(() => '?').join(', ');

describe('lifecycle races: overrides, task changes in flight, competing sweepers', () => {
  let h: Harness;
  let org: Fixture;
  let redis: Redis;
  const orms: MikroORM[] = [];
  const workers: RunningWorker[] = [];
  const servers: ScriptedServer[] = [];
  /** Releases held requests at the end whatever happened, so no listener waits for ever. */
  const holds = new Set<() => void>();
  const startedAt = Date.now();

  async function sql<T>(query: string, params: unknown[] = []): Promise<T[]> {
    return h.orm.em.fork().getConnection().execute<T[]>(query, params);
  }

  async function addWorker(config = h.config): Promise<RunningWorker> {
    const orm = await openOrm(h.config.databaseUrl, 6);
    orms.push(orm);
    const worker = await startWorker({ config, orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    workers.push(worker);
    return worker;
  }

  /** A scripted task server (with `hmacKey`, verification requests must be signed with it), closed at the end. */
  async function scriptedServer(hmacKey: string | null, respond: Responder): Promise<ScriptedServer> {
    const server = await startScriptedServer(respond, hmacKey);
    servers.push(server);
    return server;
  }

  /** Waits for a status the run does not leave by itself; `leaving` is one a person just moved it out of. */
  async function runSettles(runId: string, leaving?: string, timeoutMs = 20_000): Promise<string> {
    return eventually(
      async () => {
        const [run] = await sql<{ status: string }>(`select status from runs where id = ?`, [runId]);
        const waiting = run?.status.endsWith('_awaiting_decision') && run.status !== leaving;
        return run && (SETTLED.has(run.status) || waiting) ? run.status : undefined;
      },
      timeoutMs,
      50,
    );
  }

  async function resultsOfRun(runId: string): Promise<ResultRow[]> {
    return sql<ResultRow>(
      `select tr.id, tr.status, tr.status_timestamps, tr.version, tr.task_url
         from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ?`,
      [runId],
    );
  }

  beforeAll(async () => {
    h = await startHarness({ reachableBaseUrl: true, env: TIMINGS });
    org = await seedOrganization(h, uniqueName('faults-races'));
    redis = new Redis(h.config.redisUrl, { maxRetriesPerRequest: null });
    await addWorker();
  }, 30_000);

  afterAll(async () => {
    for (const release of holds) release();
    await Promise.all(workers.map((worker) => worker.close()));
    await Promise.all(servers.map((server) => server.close()));
    await Promise.all(orms.map((orm) => orm.close()));
    redis?.disconnect();
    await h?.close();
    recordFigures(SUITE, 'suite', { durationMs: Date.now() - startedAt });
  }, 30_000);

  it('20 concurrent overrides of one awaiting stage: exactly one 200, nineteen 409, one running-at, the run continues once', async () => {
    const scenarioStart = Date.now();
    const owner = await seedOrganization(h, uniqueName('faults-override'));
    const enabled = await api(h, 'patch', `/organizations/${owner.organization}`, owner.organizationToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    });
    expect(enabled.status).toBe(200);
    const failing = await scriptedServer(null, (delivery, res) => {
      res.writeHead(200).end();
      void callBack(delivery.payload, 'failed').catch(afterTeardown);
    });
    const taskId = await createTask(h, owner, failing.url);
    const CONCURRENT = 20;
    const ROUNDS = 3;
    const statuses: number[] = [];
    const runIds: string[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const workspaceId = await createWorkspace(h, owner.organization, owner.organizationToken, uniqueName('ws'));
      await attachTask(h, owner, workspaceId, taskId, 'mandatory');
      const runId = await createRun(h, owner.organizationToken, workspaceId, { 'auto-apply': true });
      runIds.push(runId);
      expect(await runSettles(runId)).toBe('post_plan_awaiting_decision');
      const [stage] = await sql<{ id: string; status: string }>(
        `select id, status from task_stages where run_id = ? and stage = 'post_plan'`,
        [runId],
      );
      expect(stage?.status).toBe('awaiting_override');
      const outboxEvents = async (): Promise<number> =>
        Number(
          (await sql<{ count: number }>(`select count(*)::int as count from outbox_events where aggregate_id = ?`, [runId]))[0]?.count,
        );
      const outboxBefore = await outboxEvents();
      const answers = await Promise.all(
        Array.from({ length: CONCURRENT }, () =>
          api(h, 'post', `/task-stages/${stage?.id}/actions/override`, owner.organizationToken, { comment: 'accepted risk' }),
        ),
      );
      statuses.push(...answers.map((answer) => answer.status));
      const winners = answers.filter((answer) => answer.status === 200);
      expect(winners).toHaveLength(1);
      expect(answers.filter((answer) => answer.status === 409)).toHaveLength(CONCURRENT - 1);
      const runningAt = winners[0]?.body.data.attributes['status-timestamps']['running-at'] as string;
      expect(typeof runningAt).toBe('string');
      // Only the winner woke the workers: one outbox event for the override.
      expect((await outboxEvents()) - outboxBefore).toBe(1);
      expect(await runSettles(runId, 'post_plan_awaiting_decision')).toBe('applied');
      const [after] = await sql<{ status: string; status_timestamps: Record<string, string> }>(
        `select status, status_timestamps from task_stages where id = ?`,
        [stage?.id],
      );
      expect(after?.status).toBe('passed');
      // The losers never rewrote the winner's timestamp.
      expect(after?.status_timestamps['running-at']).toBe(runningAt);
      const [run] = await sql<{ status_timestamps: Record<string, string> }>(`select status_timestamps from runs where id = ?`, [runId]);
      expect(Object.keys(run?.status_timestamps ?? {}).filter((key) => key === 'applied-at')).toHaveLength(1);
    }
    // The task was asked once per run: continuing did not re-dispatch the stage.
    expect(failing.deliveries).toHaveLength(ROUNDS);
    recordFigures(SUITE, 'concurrent-overrides', {
      rounds: ROUNDS,
      concurrentOverridesPerRound: CONCURRENT,
      requests: statuses.length,
      accepted200: statuses.filter((code) => code === 200).length,
      refused409: statuses.filter((code) => code === 409).length,
      responses5xx: statuses.filter((code) => code >= 500).length,
      invariantViolations: await expectNoViolations(h.orm, { runIds, quiescent: true }).then(() => 0),
      durationMs: Date.now() - scenarioStart,
    });
  }, 90_000);

  it('a task deleted, detached, disabled or re-pointed (URL and HMAC key) while its result is in flight: no 5xx, the result finishes with its snapshot, new runs follow the change', async () => {
    const scenarioStart = Date.now();
    const OLD_KEY = 'old-hmac-key-for-snapshot-checks';
    const NEW_KEY = 'new-hmac-key-after-the-edit-1234';
    type Change = 'delete-task' | 'detach' | 'disable' | 'edit-url-and-key';
    const changes: Change[] = ['delete-task', 'detach', 'disable', 'edit-url-and-key'];
    const apiStatuses: number[] = [];
    const runIds: string[] = [];
    const outcome: Record<string, string> = {};

    for (const change of changes) {
      // The first POST of a result is held until the change is made, then answered 503: the retry
      // after it shows which URL and key the in-flight result uses.
      const firstHeld = new Map<string, () => void>();
      const original = await scriptedServer(OLD_KEY, (delivery, res) => {
        if (delivery.attempt === 1) {
          const release = (): void => {
            holds.delete(release);
            if (!res.destroyed) res.writeHead(503).end();
          };
          holds.add(release);
          firstHeld.set(delivery.payload.task_result_id, release);
          return;
        }
        res.writeHead(200).end();
        void callBack(delivery.payload, 'passed').catch(afterTeardown);
      });
      const replacement = await scriptedServer(NEW_KEY, (delivery, res) => {
        res.writeHead(200).end();
        void callBack(delivery.payload, 'passed').catch(afterTeardown);
      });
      const taskId = await createTask(h, org, original.url, { hmacKey: OLD_KEY });
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('ws'));
      const workspaceTaskId = await attachTask(h, org, workspaceId, taskId, 'mandatory');
      // Auto-apply, so it ends applied and frees the workspace for the next run (one active run per workspace).
      const inFlightRun = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
      runIds.push(inFlightRun);
      const held = await eventually(async () => (firstHeld.size === 1 ? [...firstHeld.entries()][0] : undefined), 15_000);
      const [resultId, release] = held;

      const changed =
        change === 'delete-task'
          ? await api(h, 'delete', `/tasks/${taskId}`, org.organizationToken)
          : change === 'detach'
            ? await api(h, 'delete', `/workspaces/${workspaceId}/tasks/${workspaceTaskId}`, org.organizationToken)
            : change === 'disable'
              ? await api(h, 'patch', `/tasks/${taskId}`, org.organizationToken, {
                  data: { type: 'tasks', attributes: { enabled: false } },
                })
              : await api(h, 'patch', `/tasks/${taskId}`, org.organizationToken, {
                  data: { type: 'tasks', attributes: { url: replacement.url, 'hmac-key': NEW_KEY } },
                });
      apiStatuses.push(changed.status);
      expect({ change, status: changed.status }).toEqual({ change, status: change.startsWith('d') && change !== 'disable' ? 204 : 200 });
      release();

      // The in-flight result finishes against its snapshot: the original URL, signed with the old key.
      expect({ change, run: await runSettles(inFlightRun) }).toEqual({ change, run: 'applied' });
      const [result] = await resultsOfRun(inFlightRun);
      expect(result?.id).toBe(resultId);
      expect(result?.status).toBe('passed');
      expect(result?.task_url).toBe(original.url);
      const mine = original.deliveries.filter((delivery) => delivery.payload.task_result_id === resultId);
      expect(mine.map((delivery) => delivery.attempt)).toEqual([1, 2]);
      for (const delivery of mine) expect(delivery.signature).toBe(hmac(OLD_KEY, delivery.body));
      expect(replacement.deliveries).toHaveLength(0);

      // Old stages and results are still readable through the API.
      const stages = await api(h, 'get', `/runs/${inFlightRun}/task-stages?include=task_results`, org.organizationToken);
      const resultRead = await api(h, 'get', `/task-results/${resultId}`, org.organizationToken);
      apiStatuses.push(stages.status, resultRead.status);
      expect(stages.status).toBe(200);
      expect(resultRead.status).toBe(200);
      expect(resultRead.body.data.attributes.status).toBe('passed');

      // A new run follows the change.
      const nextRun = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
      runIds.push(nextRun);
      expect(await runSettles(nextRun)).toBe('applied');
      const nextResults = await resultsOfRun(nextRun);
      if (change === 'edit-url-and-key') {
        expect(nextResults.map((row) => [row.status, row.task_url])).toEqual([['passed', replacement.url]]);
        const [delivery] = replacement.deliveries;
        expect(delivery?.payload.run_id).toBe(nextRun);
        expect(delivery?.signature).toBe(hmac(NEW_KEY, delivery?.body ?? Buffer.alloc(0)));
      } else {
        expect(nextResults).toEqual([]);
        expect(original.deliveries.filter((delivery) => delivery.payload.run_id === nextRun)).toEqual([]);
      }
      outcome[change] =
        `in-flight ${result?.status} via snapshot; next run ${nextResults.length === 0 ? 'without the task' : 'on the new URL and key'}`;
    }
    expect(apiStatuses.filter((code) => code >= 500)).toEqual([]);
    recordFigures(SUITE, 'task-changed-in-flight', {
      changes: changes.length,
      runs: runIds.length,
      apiRequests: apiStatuses.length,
      responses5xx: apiStatuses.filter((code) => code >= 500).length,
      outcomes: outcome,
      // The HMAC keys (old and new) and every token must be nowhere in the queue's keys.
      invariantViolations: await expectNoViolations(h.orm, {
        runIds,
        quiescent: true,
        queue: { redis, prefix: h.config.queuePrefix },
        secrets: [OLD_KEY, NEW_KEY],
      }).then(() => 0),
      durationMs: Date.now() - scenarioStart,
    });
  }, 120_000);

  it('three workers ending the same expired results: exactly one terminal transition per result', async () => {
    const scenarioStart = Date.now();
    const RUNS = 30;
    const TASKS = 2;
    const silent = await scriptedServer(null, (_delivery, res) => res.writeHead(200).end());
    const taskIds = [await createTask(h, org, `${silent.url}/a`), await createTask(h, org, `${silent.url}/b`)];
    const runIds = await Promise.all(
      Array.from({ length: RUNS }, async () => {
        const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('ws'));
        for (const taskId of taskIds) await attachTask(h, org, workspaceId, taskId, 'mandatory');
        return createRun(h, org.organizationToken, workspaceId, { 'auto-apply': false });
      }),
    );
    await eventually(async () => (silent.deliveries.length >= RUNS * TASKS ? true : undefined), 30_000, 50);
    const resultIds = silent.deliveries.map((delivery) => delivery.payload.task_result_id);
    // Acknowledged and waiting for a callback that never comes.
    await eventually(async () => {
      const [row] = await sql<{ count: number }>(
        `select count(*)::int as count from task_results where id in (${inList(resultIds)}) and status = 'running' and acknowledged_at is not null`,
        resultIds,
      );
      return row?.count === RUNS * TASKS ? true : undefined;
    }, 15_000);

    // The worker that dispatched them goes; their deadlines are moved into the past while no worker runs.
    await Promise.all(workers.splice(0).map((worker) => worker.close()));
    await sql(`update task_results set progress_deadline = now() - interval '1 second' where id in (${inList(resultIds)})`, resultIds);
    const before = new Map(
      (
        await sql<{ id: string; version: number }>(`select id, version from task_results where id in (${inList(resultIds)})`, resultIds)
      ).map((row) => [row.id, row.version]),
    );
    const fast = { ...h.config, sweeperIntervalMs: 200 };
    const sweepers = await Promise.all([addWorker(fast), addWorker(fast), addWorker(fast)]);
    // More wake-ups than needed, so the three really compete: three deadline jobs per result and a burst of sweeps.
    const queue = sweepers[0]?.queue;
    if (!queue) throw new Error('no worker queue');
    await queue.addBulk([
      ...resultIds.flatMap((resultId) =>
        [0, 1, 2].map((copy) => ({ name: JOBS.taskDeadline, data: { resultId }, opts: { jobId: `race-deadline.${resultId}.${copy}` } })),
      ),
      ...Array.from({ length: 12 }, (_, index) => ({ name: JOBS.sweep, data: {}, opts: { jobId: `race-sweep.${index}` } })),
    ]);
    for (const runId of runIds) expect(await runSettles(runId)).toBe('errored');
    const after = await sql<ResultRow>(
      `select id, status, status_timestamps, version, task_url from task_results where id in (${inList(resultIds)})`,
      resultIds,
    );
    expect(after).toHaveLength(RUNS * TASKS);
    let transitions = 0;
    for (const row of after) {
      expect(row.status).toBe('errored');
      expect(finalKeys(row)).toEqual(['errored-at']);
      expect(row.version).toBe((before.get(row.id) ?? Number.NaN) + 1);
      transitions += row.version - (before.get(row.id) ?? 0);
    }
    expect(transitions).toBe(RUNS * TASKS);
    // Another burst of wake-ups once everything is final changes nothing: the timestamps were written once.
    const lateJobs = await queue.addBulk([
      ...resultIds.map((resultId) => ({ name: JOBS.taskDeadline, data: { resultId }, opts: { jobId: `race-late-deadline.${resultId}` } })),
      ...Array.from({ length: 6 }, (_, index) => ({ name: JOBS.sweep, data: {}, opts: { jobId: `race-late-sweep.${index}` } })),
    ]);
    await eventually(
      async () => ((await Promise.all(lateJobs.map((job) => job.isCompleted()))).every(Boolean) ? true : undefined),
      20_000,
      50,
    );
    const settled = await sql<ResultRow>(
      `select id, status, status_timestamps, version, task_url from task_results where id in (${inList(resultIds)})`,
      resultIds,
    );
    expect(new Map(settled.map((row) => [row.id, row]))).toEqual(new Map(after.map((row) => [row.id, row])));
    recordFigures(SUITE, 'three-sweepers', {
      workers: 3,
      runs: RUNS,
      results: RUNS * TASKS,
      deadlineJobs: RUNS * TASKS * 3,
      extraSweepJobs: 12,
      lateWakeUpsAfterFinal: resultIds.length + 6,
      terminalTransitions: transitions,
      invariantViolations: await expectNoViolations(h.orm, { runIds, quiescent: true }).then(() => 0),
      durationMs: Date.now() - scenarioStart,
    });
  }, 120_000);
});
