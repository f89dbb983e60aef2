import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EnforcementLevel, RunStage } from '@runtasks/shared/domain';
import { probeKey } from '@runtasks/shared/queue';
import { startRunTaskServer, type RunTaskMode, type RunTaskServer, type TaskResultStatus } from '../../examples/run-task-server/server.ts';
import { orchestrationReads } from '../../services/worker/test/orchestration/reads.ts';
import { onCleanup, runCleanups, workerEnv, WorkerFleet } from '../support/cluster.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  seedOrganization,
  uniqueName,
  type Fixture,
} from '../support/fixtures.ts';
import { checkInvariants } from '../support/invariants.ts';
import { freePort, probe, readiness } from '../support/processes.ts';
import { RedisClusterSet, SentinelSet } from '../support/redis-topologies.ts';
import { startOutsideStack, type OutsideStack } from '../support/outside-stack.ts';

/** A progress deadline short enough to be waited for, long enough for a loaded machine's callbacks. */
const PROGRESS_TIMEOUT_SECONDS = 6;
const PASSWORD = 'data-node-password';

interface TaskSpec {
  enforcement?: EnforcementLevel;
  stages?: RunStage[];
  result?: TaskResultStatus;
  mode?: RunTaskMode;
  callbackDelayMs?: number;
}

/**
 * The orchestration behaviour checked from outside, with the service (an API process and two worker
 * processes, started as an operator starts them) pointed at a Redis of `mode` on loopback, with a
 * password: readiness names the mode and the node; a run is dispatched, called back and applied;
 * enforcement levels decide; a task that never answers meets its deadline; an override lets a held run
 * go on; a cancel stops one mid-task. The rate limit is on, at its default.
 */
export function describeOrchestrationOutside(mode: 'sentinel' | 'cluster'): void {
  describe(`orchestration from outside, Redis ${mode === 'sentinel' ? 'Sentinel' : 'Cluster'}`, () => {
    let topology: SentinelSet | RedisClusterSet;
    let stack: OutsideStack;
    let org: Fixture;
    let overrideOrg: Fixture;
    const servers: RunTaskServer[] = [];
    const waitFor = <T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 40_000): Promise<T> =>
      eventually(check, timeoutMs, 150).catch((error: unknown) => {
        throw new Error(`${what}: ${String(error)}\n${stack.fleet.tails()}\n--- api\n${stack.api.tail()}`, { cause: error });
      });
    const reads = orchestrationReads(
      {
        get h() {
          return stack.outside;
        },
      },
      waitFor,
    );

    beforeAll(async () => {
      topology =
        mode === 'sentinel' ? await SentinelSet.start({ password: PASSWORD }) : await RedisClusterSet.start({ password: PASSWORD });
      onCleanup(() => topology.stop(), `redis ${mode}`);
      stack = await startOutsideStack({
        redisEnv: topology.env(),
        // As an operator of each would: the cluster's hash tag, the sentinel set's default prefix.
        queuePrefix: mode === 'cluster' ? '{runtasks}' : 'runtasks',
        extraEnv: {
          TASK_PROGRESS_TIMEOUT_SECONDS: String(PROGRESS_TIMEOUT_SECONDS),
          TASK_RETRY_DELAYS_SECONDS: '0.2,0.2',
          SWEEPER_INTERVAL_SECONDS: '0.5',
          // The default limit, on (the API process of the harness turns it off otherwise).
          RATE_LIMIT_PER_SECOND: '30',
        },
      });
      org = await seedOrganization(stack.outside, uniqueName(`out-${mode}`));
      overrideOrg = await seedOrganization(stack.outside, uniqueName(`out-${mode}-override`));
      const enabled = await api(stack.outside, 'patch', `/organizations/${overrideOrg.organization}`, overrideOrg.organizationToken, {
        data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
      });
      expect(enabled.status).toBe(200);
    }, 180_000);

    afterAll(async () => {
      await Promise.all(servers.map((server) => server.close()));
      // What the runs left behind, read from the database and from the node the queue lives on.
      const redis =
        topology instanceof SentinelSet
          ? await topology.primaryClient()
          : await topology.primaryClientOf(probeKey(stack.config.queuePrefix));
      try {
        const check = await checkInvariants(stack.db.orm, {
          quiescent: true,
          graceSeconds: 5,
          queue: { redis, prefix: stack.config.queuePrefix },
        });
        expect(check.violations).toEqual([]);
        expect(await stack.queue.getFailedCount()).toBe(0);
        expect(stack.fleet.unexpectedExits).toEqual([]);
        expect(stack.api.unexpectedExits).toEqual([]);
      } finally {
        redis.disconnect();
        await runCleanups();
      }
    }, 120_000);

    /** A fresh workspace of `owner` with one task per spec, each on its own task server. */
    async function workspaceWith(owner: Fixture, specs: TaskSpec[]): Promise<{ workspaceId: string; servers: RunTaskServer[] }> {
      const workspaceId = await createWorkspace(stack.outside, owner.organization, owner.organizationToken, uniqueName('ws'));
      const own: RunTaskServer[] = [];
      for (const spec of specs) {
        const hmacKey = `hmac-${uniqueName('key')}-0123456789`;
        const server = await startRunTaskServer({
          hmacKey,
          mode: spec.mode ?? 'callback',
          result: spec.result ?? 'passed',
          callbackDelayMs: spec.callbackDelayMs,
        });
        servers.push(server);
        own.push(server);
        const taskId = await createTask(stack.outside, owner, `${server.url}/run-task`, { hmacKey });
        await attachTask(stack.outside, owner, workspaceId, taskId, spec.enforcement ?? 'mandatory', spec.stages ?? ['post_plan']);
      }
      return { workspaceId, servers: own };
    }

    it('reports the mode and the node it talks to in /readyz, the API and a worker alike', async () => {
      const expectedNode = `127.0.0.1:${topology instanceof SentinelSet ? await topology.primaryPort() : await topology.primaryPortOf(probeKey(stack.config.queuePrefix))}`;
      const api = await probe(`${stack.api.baseUrl}/readyz`);
      expect(api.status).toBe(200);
      expect(readiness(api).components['redis']).toEqual({ ok: true, mode, node: expectedNode });

      const healthPort = await freePort();
      const fleet = new WorkerFleet({
        ...workerEnv(stack.db, { ...stack.env, PUBLIC_BASE_URL: stack.api.baseUrl }),
        WORKER_HEALTH_PORT: String(healthPort),
      });
      await fleet.start().started;
      const worker = await eventually(
        async () => {
          const answer = await probe(`http://127.0.0.1:${healthPort}/readyz`);
          return answer.status === 200 ? answer : undefined;
        },
        15_000,
        100,
      );
      expect(readiness(worker).components['redis']).toEqual({ ok: true, mode, node: expectedNode });
      await fleet.stop();
    }, 60_000);

    it('dispatches to each task, takes the signed callbacks and applies the run', async () => {
      const {
        workspaceId,
        servers: [prePlan, postPlan],
      } = await workspaceWith(org, [{ stages: ['pre_plan'] }, { stages: ['post_plan'] }]);
      const runId = await createRun(stack.outside, org.organizationToken, workspaceId, { 'auto-apply': true });
      const run = await reads.runReaches(org, runId, 'applied');
      expect(run.warnings).toBe(false);
      for (const [server, stage] of [
        [prePlan, 'pre_plan'],
        [postPlan, 'post_plan'],
      ] as const) {
        const requests = reads.runRequests(server as RunTaskServer);
        expect(requests).toHaveLength(1);
        expect(requests[0]?.signatureVerified).toBe(true);
        const { stage: view, results } = await reads.stageOf(org, runId, stage);
        expect(view.status).toBe('passed');
        expect(results.map((result) => [result.id, result.status])).toEqual([[reads.payloadOf(requests[0]).task_result_id, 'passed']]);
        expect((await reads.callbacksAnswered(server as RunTaskServer, 1)).callbacks.map((call) => call.status)).toEqual([200]);
      }
    }, 90_000);

    it('applies the enforcement levels: a failed mandatory task errors the run, a failed advisory one warns', async () => {
      const mandatory = await workspaceWith(org, [{ result: 'failed' }]);
      const advisory = await workspaceWith(org, [{ result: 'failed', enforcement: 'advisory' }]);
      const mandatoryRun = await createRun(stack.outside, org.organizationToken, mandatory.workspaceId, { 'auto-apply': true });
      const advisoryRun = await createRun(stack.outside, org.organizationToken, advisory.workspaceId, { 'auto-apply': true });
      await reads.runReaches(org, mandatoryRun, 'errored');
      expect((await reads.stageOf(org, mandatoryRun, 'post_plan')).stage.status).toBe('failed');
      const warned = await reads.runReaches(org, advisoryRun, 'applied');
      expect(warned.warnings).toBe(true);
      const { stage, results } = await reads.stageOf(org, advisoryRun, 'post_plan');
      expect([stage.status, results.map((result) => result.status)]).toEqual(['passed', ['failed']]);
    }, 90_000);

    it('ends a result the task never answers at its progress deadline, and the run with it', async () => {
      const {
        workspaceId,
        servers: [silent],
      } = await workspaceWith(org, [{ mode: 'no-callback' }]);
      const runId = await createRun(stack.outside, org.organizationToken, workspaceId, { 'auto-apply': true });
      const request = await reads.answeredRequest(silent as RunTaskServer);
      const result = await reads.resultReaches(org, reads.payloadOf(request).task_result_id, 'errored');
      const started = Date.parse(result.timestamps['running-at'] ?? result.timestamps['pending-at'] ?? '');
      expect(Date.parse(result.timestamps['errored-at'] ?? '') - started).toBeGreaterThanOrEqual(PROGRESS_TIMEOUT_SECONDS * 1000 - 1000);
      await reads.runReaches(org, runId, 'errored');
    }, 90_000);

    it('holds a failed mandatory stage for an override; the override lets the run go on', async () => {
      const { workspaceId } = await workspaceWith(overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(stack.outside, overrideOrg.organizationToken, workspaceId, { 'auto-apply': true });
      await reads.runReaches(overrideOrg, runId, 'post_plan_awaiting_decision');
      const { stage } = await reads.stageOf(overrideOrg, runId, 'post_plan');
      expect(stage.status).toBe('awaiting_override');
      const overridden = await api(stack.outside, 'post', `/task-stages/${stage.id}/actions/override`, overrideOrg.organizationToken, {
        comment: 'accepted',
      });
      expect(overridden.status).toBe(200);
      const run = await reads.runReaches(overrideOrg, runId, 'applied', 'post_plan_awaiting_decision');
      expect(run.warnings).toBe(true);
      expect((await reads.stageOf(overrideOrg, runId, 'post_plan')).stage.status).toBe('passed');
    }, 90_000);

    it('cancels a run while its task works; the late callback is refused', async () => {
      const {
        workspaceId,
        servers: [slow],
      } = await workspaceWith(org, [{ callbackDelayMs: 4_000 }]);
      const runId = await createRun(stack.outside, org.organizationToken, workspaceId, { 'auto-apply': true });
      const request = await reads.answeredRequest(slow as RunTaskServer);
      const cancel = await api(stack.outside, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken);
      expect(cancel.status).toBe(202);
      await reads.runReaches(org, runId, 'canceled');
      expect((await reads.getResult(org, reads.payloadOf(request).task_result_id)).status).toBe('canceled');
      const answered = await reads.callbacksAnswered(slow as RunTaskServer, 1);
      expect(answered.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 409]]);
    }, 90_000);
  });
}
