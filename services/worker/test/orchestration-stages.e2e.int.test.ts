import { describe, expect, it } from '@jest/globals';
import { JOBS } from '@runtasks/shared/queue';
import { type RunStage } from '@runtasks/shared/domain';
import { expectError } from '../../../test/support/assertions.ts';
import { api, createRun } from '../../../test/support/fixtures.ts';
import { type AttemptView, RFC3339, type TaskSetup, type TaskSpec } from './orchestration/views.ts';
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
  const {
    waitFor,
    runRequests,
    payloadOf,
    workspaceWith,
    getRun,
    stagesOf,
    stageOf,
    getResult,
    attemptsOf,
    runReaches,
    resultReaches,
    callback,
    verdict,
  } = g;

  it('runs two tasks on post_plan as one stage holding two results, each task getting its own result id', async () => {
    const { workspaceId, tasks } = await workspaceWith(g.org, [{}, { enforcement: 'advisory' }]);
    const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': false });
    await runReaches(g.org, runId, 'post_plan_completed');
    const { stages, results } = await stagesOf(g.org, runId);
    expect(stages.map((stage) => [stage.stage, stage.status])).toEqual([['post_plan', 'passed']]);
    const resultIds = stages[0]?.resultIds ?? [];
    expect(resultIds).toHaveLength(2);
    for (const { taskId, server } of tasks) {
      const result = [...results.values()].find((candidate) => candidate.taskId === taskId);
      expect(result?.status).toBe('passed');
      expect(runRequests(server)).toHaveLength(1);
      const payload = payloadOf(runRequests(server)[0]);
      expect(payload.task_result_id).toBe(result?.id);
      expect(payload.task_result_callback_url).toBe(`${g.h.config.publicBaseUrl}/api/v2/task-results/${result?.id}/callback`);
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
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ ...expected.spec, enforcement }]);
      const server = (tasks[0] as TaskSetup).server;
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': false });
      const [resultId] = (await stageOf(g.org, runId, 'post_plan')).stage.resultIds;
      const result = await resultReaches(g.org, resultId as string, expected.result);
      expect(result.enforcement).toBe(enforcement);
      expect(result.timestamps[`${expected.result}-at`]).toMatch(RFC3339);
      if (expected.result !== 'passed' && expected.result !== 'failed') expect(result.message).toEqual(expect.any(String));

      const blocks = enforcement === 'mandatory' && outcome !== 'passed';
      const run = await runReaches(g.org, runId, blocks ? 'errored' : 'post_plan_completed');
      // A mandatory failure is the stage's status; advisory failures only warn.
      const { stage } = await stageOf(g.org, runId, 'post_plan');
      expect(stage.status).toBe(blocks ? expected.result : 'passed');
      expect(run.warnings).toBe(enforcement === 'advisory' && outcome !== 'passed');
      expect(run.timestamps['post-plan-running-at']).toMatch(RFC3339);
      if (blocks) expect(run.timestamps['post-plan-completed-at']).toBeUndefined();

      expect(await attemptsOf(g.org, resultId as string)).toEqual(expected.attempts);
      // Every recorded attempt that got an answer is a request the task server received, and no more.
      const delivered = expected.attempts.filter((attempt) => attempt['http-status'] !== null).length;
      expect(runRequests(server)).toHaveLength(delivered);
      for (const request of runRequests(server)) expect(payloadOf(request).task_result_id).toBe(resultId);

      if (outcome === 'no callback') {
        // The task wakes up after the progress timeout ended it: too late, and nothing changes.
        const late = await callback(resultId as string, payloadOf(runRequests(server)[0]).access_token, verdict('passed'));
        expectError(late, 409);
        expect(late.body.errors[0].title).toBe('transition not allowed');
        expect((await getResult(g.org, resultId as string)).status).toBe('errored');
        expect((await getRun(g.org, runId)).status).toBe(run.status);
      }
    });
  });

  describe('run lifecycle across the four stages', () => {
    const ALL_STAGES: RunStage[] = ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'];
    const ORDER: RunStage[] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];

    it('gives a run with tasks on every stage four stages in lifecycle order; auto-apply reaches post_apply_completed', async () => {
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ stages: ALL_STAGES }]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': true });
      // The stages exist, pending, as soon as the run does.
      const created = await getRun(g.org, runId);
      expect(created.stageIds).toHaveLength(4);
      const run = await runReaches(g.org, runId, 'post_apply_completed');
      const { stages, results } = await stagesOf(g.org, runId);
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
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ stages: ALL_STAGES }]);
      const server = (tasks[0] as TaskSetup).server;
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': false });
      await runReaches(g.org, runId, 'post_plan_completed');
      const reachedAt = Date.now();
      // Wait for proof that a worker looked at the run again and left it: a sweep that began when the run had
      // been idle for longer than the sweeper's grace (1 s here) judged it waiting for a person and woke nothing.
      await waitFor(async () => {
        const jobs = await g.queue.getJobs(['completed'], 0, 199);
        return jobs.some((job) => job.name === JOBS.sweep && (job.processedOn ?? 0) > reachedAt + 2_000) ? true : undefined;
      }, 'a sweep with the waiting run idle');
      const wakeUps = (await g.queue.getJobs(['completed', 'active', 'waiting', 'delayed'], 0, 999)).filter(
        (job) => job.name === JOBS.runAdvance && (job.data as { runId?: string }).runId === runId && job.timestamp > reachedAt,
      );
      expect(wakeUps).toEqual([]);
      const waiting = await getRun(g.org, runId);
      expect(waiting.status).toBe('post_plan_completed');
      expect(waiting.timestamps['confirmed-at']).toBeUndefined();
      const { stages } = await stagesOf(g.org, runId);
      expect(stages.map((stage) => stage.status)).toEqual(['passed', 'passed', 'pending', 'pending']);
      expect(runRequests(server).map((request) => payloadOf(request).stage)).toEqual(['pre_plan', 'post_plan']);

      const apply = await api(g.h, 'post', `/runs/${runId}/actions/apply`, g.org.organizationToken, { comment: 'ship it' });
      expect(apply.status).toBe(202);
      const run = await runReaches(g.org, runId, 'post_apply_completed');
      expect(run.timestamps['confirmed-at']).toMatch(RFC3339);
      expect(runRequests(server).map((request) => payloadOf(request).stage)).toEqual(ORDER);
      expect((await stagesOf(g.org, runId)).stages.map((stage) => stage.status)).toEqual(['passed', 'passed', 'passed', 'passed']);
    });

    it('does not let a failed mandatory post_apply task block: post_apply_completed with warnings', async () => {
      const { workspaceId } = await workspaceWith(g.org, [{ stages: ['post_apply'], enforcement: 'mandatory', result: 'failed' }]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': true });
      const run = await runReaches(g.org, runId, 'post_apply_completed');
      expect(run.warnings).toBe(true);
      expect(run.timestamps['applied-at']).toMatch(RFC3339);
      const { stage, results } = await stageOf(g.org, runId, 'post_apply');
      expect(stage.status).toBe('passed');
      expect(results.map((result) => [result.enforcement, result.status])).toEqual([['mandatory', 'failed']]);
    });

    it('errors the run on a blocking pre_apply stage: no apply, no post_apply dispatch', async () => {
      const { workspaceId, tasks } = await workspaceWith(g.org, [
        { stages: ['pre_apply'], enforcement: 'mandatory', result: 'failed' },
        { stages: ['post_apply'], enforcement: 'advisory' },
      ]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': true });
      const run = await runReaches(g.org, runId, 'errored');
      expect(run.timestamps['pre-apply-running-at']).toMatch(RFC3339);
      expect(run.timestamps['pre-apply-completed-at']).toBeUndefined();
      expect(run.timestamps['applying-at']).toBeUndefined();
      expect(run.timestamps['applied-at']).toBeUndefined();
      expect(run.timestamps['post-apply-running-at']).toBeUndefined();
      expect((await stageOf(g.org, runId, 'pre_apply')).stage.status).toBe('failed');
      // The post_apply result was never started (the decision to stop was taken in the same transaction),
      // and ends canceled with the run rather than staying pending forever.
      const postApply = await stageOf(g.org, runId, 'post_apply');
      expect(postApply.stage.status).toBe('canceled');
      expect(postApply.results.map((result) => result.status)).toEqual(['canceled']);
      expect(await attemptsOf(g.org, postApply.results[0]?.id as string)).toEqual([]);
      expect(runRequests((tasks[1] as TaskSetup).server)).toEqual([]);
    });

    it('gives a plan-only run no pre_apply/post_apply stages; it ends planned_and_finished', async () => {
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ stages: ALL_STAGES }]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'plan-only': true });
      const run = await runReaches(g.org, runId, 'planned_and_finished');
      const { stages } = await stagesOf(g.org, runId);
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
});
