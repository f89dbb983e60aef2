import { describe, expect, it } from '@jest/globals';
import { expectError } from '../../../test/support/assertions.ts';
import { api, createRun } from '../../../test/support/fixtures.ts';
import { PROGRESS_TIMEOUT_MS, RFC3339, type TaskSetup } from './orchestration/views.ts';
import { useOrchestration } from './orchestration/setup.ts';

/**
 * End to end: the API in this process, two worker processes (services/worker/src/main.ts) sharing
 * PostgreSQL and Redis with it, and real task servers (examples/run-task-server) on loopback that
 * are called, acknowledge, read the plan with their access token and call back. Timings come from
 * the environment (4 s progress timeout, 0.2 s retry delays, 0.5 s sweeper), so the file stays fast.
 * The progress timeout ends every stage whose task has not answered in time, so it is also the
 * longest stall of the machine a passing run survives: at 2 s, a four-stage run ended `errored`
 * once under the full suite's load.
 */
describe('orchestration end to end: API + two worker processes + real task servers', () => {
  const g = useOrchestration();
  const { sql, payloadOf, workspaceWith, getRun, stageOf, getResult, attemptsOf, runReaches, answeredRequest, callbacksAnswered } = g;

  describe('override, discard and cancel', () => {
    it('holds a failed mandatory post_plan stage for an override; overriding lets the run continue', async () => {
      const { workspaceId } = await workspaceWith(g.overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(g.h, g.overrideOrg.organizationToken, workspaceId, { 'auto-apply': true });
      await runReaches(g.overrideOrg, runId, 'post_plan_awaiting_decision');
      const { stage, results } = await stageOf(g.overrideOrg, runId, 'post_plan');
      expect(stage.status).toBe('awaiting_override');
      expect(results.map((result) => result.status)).toEqual(['failed']);

      const overridden = await api(g.h, 'post', `/task-stages/${stage.id}/actions/override`, g.overrideOrg.organizationToken, {
        comment: 'accepted risk',
      });
      expect(overridden.status).toBe(200);
      expect(overridden.body.data.id).toBe(stage.id);
      expect(overridden.body.data.attributes.status).toBe('running');
      expect(overridden.body.data.attributes['status-timestamps']['awaiting-override-at']).toMatch(RFC3339);

      const run = await runReaches(g.overrideOrg, runId, 'applied', 'post_plan_awaiting_decision');
      const after = await stageOf(g.overrideOrg, runId, 'post_plan');
      expect(after.stage.status).toBe('passed');
      // The verdict stays what the task said; the run carries the warning.
      expect(after.results.map((result) => result.status)).toEqual(['failed']);
      expect(run.warnings).toBe(true);
      expect(run.timestamps['post-plan-completed-at']).toMatch(RFC3339);
      // Not awaiting any more: a second override is refused.
      const again = await api(g.h, 'post', `/task-stages/${stage.id}/actions/override`, g.overrideOrg.organizationToken, {});
      expectError(again, 409);
      expect(again.body.errors[0].title).toBe('transition not allowed');
    });

    it('never holds a speculative (plan-only) run: it errors', async () => {
      const { workspaceId } = await workspaceWith(g.overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(g.h, g.overrideOrg.organizationToken, workspaceId, { 'plan-only': true });
      await runReaches(g.overrideOrg, runId, 'errored');
      expect((await stageOf(g.overrideOrg, runId, 'post_plan')).stage.status).toBe('failed');
    });

    it('discards a run awaiting a decision: run discarded, stage canceled', async () => {
      const { workspaceId } = await workspaceWith(g.overrideOrg, [{ result: 'failed' }]);
      const runId = await createRun(g.h, g.overrideOrg.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(g.overrideOrg, runId, 'post_plan_awaiting_decision');
      const discard = await api(g.h, 'post', `/runs/${runId}/actions/discard`, g.overrideOrg.organizationToken);
      expect(discard.status).toBe(202);
      const run = await runReaches(g.overrideOrg, runId, 'discarded');
      expect(run.timestamps['discarded-at']).toMatch(RFC3339);
      const { stage, results } = await stageOf(g.overrideOrg, runId, 'post_plan');
      expect(stage.status).toBe('canceled');
      expect(results.map((result) => result.status)).toEqual(['failed']);
      expectError(await api(g.h, 'post', `/task-stages/${stage.id}/actions/override`, g.overrideOrg.organizationToken, {}), 409);
    });

    it('cancels a run while a task has acknowledged but not called back; the later callback gets 409', async () => {
      // The callback comes well inside the progress window, late enough for the cancel to come first.
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ callbackDelayMs: 0.75 * PROGRESS_TIMEOUT_MS, readPlan: false }]);
      const server = (tasks[0] as TaskSetup).server;
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': true });
      const request = await answeredRequest(server);
      expect(request.status).toBe(200);
      expect(request.callbacks).toEqual([]);
      const cancel = await api(g.h, 'post', `/runs/${runId}/actions/cancel`, g.org.organizationToken);
      expect(cancel.status).toBe(202);
      const run = await runReaches(g.org, runId, 'canceled');
      const resultId = payloadOf(request).task_result_id;
      const before = await getResult(g.org, resultId);
      expect(before.status).toBe('canceled');
      expect((await stageOf(g.org, runId, 'post_plan')).stage.status).toBe('canceled');

      // The task finishes its work and reports: too late.
      const answered = await callbacksAnswered(server, 1);
      expect(answered.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 409]]);
      expect(await getResult(g.org, resultId)).toEqual(before);
      expect((await getRun(g.org, runId)).status).toBe(run.status);
      expect((await stageOf(g.org, runId, 'post_plan')).stage.status).toBe('canceled');
    });
  });

  describe('callbacks and deadlines with real task servers', () => {
    it('refuses a duplicate final callback: first 200, second 409', async () => {
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ mode: 'double-callback' }]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(g.org, runId, 'post_plan_completed');
      const request = await callbacksAnswered((tasks[0] as TaskSetup).server, 2);
      expect(request.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([
        ['passed', 200],
        ['passed', 409],
      ]);
      // The outcome of the refused duplicate was not stored twice.
      expect((await getResult(g.org, payloadOf(request).task_result_id)).outcomesCount).toBe(1);
    });

    it('accepts a callback that arrives before the POST is acknowledged', async () => {
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ mode: 'callback-before-ack' }]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(g.org, runId, 'post_plan_completed');
      const request = await answeredRequest((tasks[0] as TaskSetup).server);
      expect(request.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 200]]);
      const resultId = payloadOf(request).task_result_id;
      expect((await getResult(g.org, resultId)).status).toBe('passed');
      expect(await attemptsOf(g.org, resultId)).toEqual([{ attempt: 1, 'http-status': 200, 'error-kind': null }]);
    });

    it('extends the deadline on a running progress callback; the same task without progress times out', async () => {
      // A slow path to the task (3 s) puts its callbacks late in the 4 s progress window: the final
      // verdict comes ~5.4 s after the stage started, past the first deadline.
      const slow = { delayMs: 0.75 * PROGRESS_TIMEOUT_MS, callbackDelayMs: 0.6 * PROGRESS_TIMEOUT_MS, readPlan: false };
      const progressing = await workspaceWith(g.org, [{ ...slow, mode: 'progress' }]);
      const silent = await workspaceWith(g.org, [{ ...slow, mode: 'callback' }]);
      const progressRun = await createRun(g.h, g.org.organizationToken, progressing.workspaceId, { 'auto-apply': false });
      const silentRun = await createRun(g.h, g.org.organizationToken, silent.workspaceId, { 'auto-apply': false });

      await runReaches(g.org, progressRun, 'post_plan_completed');
      const progressRequest = await callbacksAnswered((progressing.tasks[0] as TaskSetup).server, 2);
      expect(progressRequest.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([
        ['running', 200],
        ['passed', 200],
      ]);
      const progressId = payloadOf(progressRequest).task_result_id;
      const [row] = await sql<{ progress_deadline: Date | string }>(`select progress_deadline from task_results where id = ?`, [
        progressId,
      ]);
      const result = await getResult(g.org, progressId);
      const startedAt = Date.parse(result.timestamps['running-at'] ?? '');
      // Without the progress callback the deadline was startedAt + 2 s; the verdict came after it.
      expect(Date.parse(result.timestamps['passed-at'] ?? '') - startedAt).toBeGreaterThan(PROGRESS_TIMEOUT_MS);
      expect(new Date(row?.progress_deadline ?? 0).getTime() - startedAt).toBeGreaterThan(PROGRESS_TIMEOUT_MS);

      // The control: same timings, no progress → errored at the deadline, and its verdict is refused.
      await runReaches(g.org, silentRun, 'errored');
      const silentRequest = await callbacksAnswered((silent.tasks[0] as TaskSetup).server, 1);
      expect(silentRequest.callbacks.map((call) => [call.resultStatus, call.status])).toEqual([['passed', 409]]);
      const silentResult = await getResult(g.org, payloadOf(silentRequest).task_result_id);
      expect(silentResult.status).toBe('errored');
      expect(silentResult.outcomesCount).toBe(0);
      expect((await stageOf(g.org, silentRun, 'post_plan')).stage.status).toBe('errored');
    });
  });
});
