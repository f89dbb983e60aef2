import { beforeAll, describe, expect, it } from '@jest/globals';
import { type RunStatus } from '@runtasks/shared/domain';
import { TaskResult, TaskStage } from '@runtasks/shared/db';
import { api, createRun, createWorkspace, type Fixture, seedOrganization } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound } from '../../../test/support/assertions.ts';
import {
  attachTask,
  createRunTask,
  expectTransitionNotAllowed,
  externalIdOf,
  resultsInDb,
  setRunStatus,
  stagesInDb,
} from './runs/helpers.ts';
import { useRunsApi } from './runs/setup.ts';

describe('runs API', () => {
  const g = useRunsApi();

  describe('run actions', () => {
    let org: Fixture;
    let orgId: string;
    let workspaceId: string;
    beforeAll(async () => {
      org = await seedOrganization(g.h, 'actions');
      orgId = await externalIdOf(g.h, org.organization);
      workspaceId = await createWorkspace(g.h, org.organization, org.organizationToken, 'with-tasks');
      const first = await createRunTask(g.h, orgId, 'first');
      const second = await createRunTask(g.h, orgId, 'second');
      // No pre_plan tasks: a run with some would start its pre_plan stage as it is created, never pending.
      await attachTask(g.h, workspaceId, first, ['post_plan', 'pre_apply']);
      await attachTask(g.h, workspaceId, second, ['post_plan']);
    });

    const runWithTasks = () => createRun(g.h, org.organizationToken, workspaceId);
    const show = async (runId: string) => (await api(g.h, 'get', `/runs/${runId}?include=task_stages`, org.organizationToken)).body;

    it('answers 409 "transition not allowed" to apply on a pending run, which stays pending', async () => {
      const runId = await runWithTasks();
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken));
      expect((await show(runId)).data.attributes.status).toBe('pending');
    });

    it('cancels a pending run (202), canceling its stages and results', async () => {
      const runId = await runWithTasks();
      expect((await stagesInDb(g.h, runId)).map((stage) => stage.status)).toEqual(['pending', 'pending']);
      const res = await api(g.h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken, { comment: 'stop' });
      expect(res.status).toBe(202);
      expect(res.text).toBe('');
      expect(res.headers['content-type']).toBeUndefined();

      const body = await show(runId);
      expect(body.data.attributes.status).toBe('canceled');
      expect(body.data.attributes['status-timestamps']).toEqual({
        'plan-queueable-at': body.data.attributes['created-at'],
        'canceled-at': expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });
      expect(body.data.attributes.actions).toMatchObject({ 'is-cancelable': false, 'is-confirmable': false, 'is-discardable': false });
      expect(body.included).toHaveLength(2);
      for (const stage of body.included) {
        expect(stage.attributes.status).toBe('canceled');
        expect(stage.attributes['status-timestamps']).toEqual({ 'canceled-at': expect.any(String) });
      }
      const results = await resultsInDb(g.h, runId);
      expect(results).toHaveLength(3);
      expect(results.map((result) => result.status)).toEqual(['canceled', 'canceled', 'canceled']);
      expect(results.map((result) => result.statusTimestamps)).toEqual([0, 1, 2].map(() => ({ 'canceled-at': expect.any(String) })));

      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken));
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken));
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken));
    });

    it('discards a pending run (202), canceling its stages and results', async () => {
      const runId = await runWithTasks();
      const res = await api(g.h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken);
      expect(res.status).toBe(202);
      expect(res.text).toBe('');
      const body = await show(runId);
      expect(body.data.attributes.status).toBe('discarded');
      expect(body.data.attributes['status-timestamps']).toEqual({
        'plan-queueable-at': body.data.attributes['created-at'],
        'discarded-at': expect.any(String),
      });
      expect(body.included.map((stage: { attributes: { status: string } }) => stage.attributes.status)).toEqual(['canceled', 'canceled']);
      expect((await resultsInDb(g.h, runId)).every((result) => result.status === 'canceled')).toBe(true);
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken));
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken));
    });

    /** A run with its post_plan stage and that stage's results in `postPlan`, and the run in `status`. */
    async function runWithPostPlan(postPlan: 'running' | 'passed', status: RunStatus): Promise<string> {
      const runId = await runWithTasks();
      const em = g.h.orm.em.fork();
      const stage = (await stagesInDb(g.h, runId)).find((candidate) => candidate.stage === 'post_plan')!;
      await em.nativeUpdate(TaskStage, { id: stage.id }, { status: postPlan });
      await em.nativeUpdate(TaskResult, { taskStage: stage.id }, { status: postPlan });
      await setRunStatus(g.h, runId, status);
      return runId;
    }

    it("discards a run whose post_plan tasks are running (202; HCP's discardable group), canceling what is open", async () => {
      const runId = await runWithPostPlan('running', 'post_plan_running');
      expect((await show(runId)).data.attributes.actions).toMatchObject({ 'is-cancelable': true, 'is-discardable': true });

      expect((await api(g.h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken)).status).toBe(202);
      expect((await show(runId)).data.attributes.status).toBe('discarded');
      expect(Object.fromEntries((await stagesInDb(g.h, runId)).map((stage) => [stage.stage, stage.status]))).toEqual({
        post_plan: 'canceled',
        pre_apply: 'canceled',
      });
      expect((await resultsInDb(g.h, runId)).every((result) => result.status === 'canceled')).toBe(true);
    });

    it('leaves finished stages and results alone when canceling', async () => {
      const runId = await runWithPostPlan('passed', 'confirmed');

      expect((await api(g.h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken)).status).toBe(202);
      const stages = await stagesInDb(g.h, runId);
      expect(Object.fromEntries(stages.map((stage) => [stage.stage, stage.status]))).toEqual({
        post_plan: 'passed',
        pre_apply: 'canceled',
      });
      const results = await resultsInDb(g.h, runId);
      expect(results.filter((result) => result.stage === 'post_plan').map((result) => result.status)).toEqual(['passed', 'passed']);
      expect(results.filter((result) => result.stage === 'pre_apply').map((result) => result.status)).toEqual(['canceled']);
    });

    it('applies a planned run (202 → confirmed), but not a plan-only one', async () => {
      const runId = await runWithTasks();
      await setRunStatus(g.h, runId, 'post_plan_completed');
      const before = await show(runId);
      expect(before.data.attributes.actions['is-confirmable']).toBe(true);
      const res = await api(g.h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken, { comment: 'ship it' });
      expect(res.status).toBe(202);
      const after = await show(runId);
      expect(after.data.attributes.status).toBe('confirmed');
      expect(after.data.attributes['status-timestamps']).toEqual({
        'plan-queueable-at': after.data.attributes['created-at'],
        'confirmed-at': expect.any(String),
      });
      // Apply leaves the stages to the worker.
      expect(after.included.map((stage: { attributes: { status: string } }) => stage.attributes.status)).toEqual(['pending', 'pending']);
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken));
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken));

      const planOnly = await createRun(g.h, org.organizationToken, workspaceId, { 'plan-only': true });
      await setRunStatus(g.h, planOnly, 'planned');
      expectTransitionNotAllowed(await api(g.h, 'post', `/runs/${planOnly}/actions/apply`, org.organizationToken));
      expect((await show(planOnly)).data.attributes.status).toBe('planned');
      expect((await api(g.h, 'post', `/runs/${planOnly}/actions/discard`, org.organizationToken)).status).toBe(202);
    });

    it('answers 422 with a pointer for a wrongly typed comment', async () => {
      const runId = await runWithTasks();
      expectError(await api(g.h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken, { comment: 5 }), 422, '/comment');
      expect((await show(runId)).data.attributes.status).toBe('pending');
    });

    describe('permissions', () => {
      it('answers 403 naming the apply permission to a team with runs plan or read, leaving the run untouched', async () => {
        for (const token of [g.plannerToken, g.readerToken]) {
          const runId = await createRun(g.h, g.acme.organizationToken, g.acme.workspaceId);
          for (const action of ['cancel', 'discard', 'apply'])
            expect(expectError(await api(g.h, 'post', `/runs/${runId}/actions/${action}`, token), 403).detail).toBe(
              `This token may read the run but may not ${action} it: that takes the "apply" runs permission on the workspace.`,
            );
          expect((await api(g.h, 'get', `/runs/${runId}`, g.acme.organizationToken)).body.data.attributes.status).toBe('pending');
        }
      });

      it('lets a team with runs apply cancel and discard', async () => {
        const toCancel = await createRun(g.h, g.acme.organizationToken, g.acme.workspaceId);
        expect((await api(g.h, 'post', `/runs/${toCancel}/actions/cancel`, g.applierToken)).status).toBe(202);
        expect((await api(g.h, 'get', `/runs/${toCancel}`, g.acme.organizationToken)).body.data.attributes.status).toBe('canceled');
        const toDiscard = await createRun(g.h, g.acme.organizationToken, g.acme.workspaceId);
        expect((await api(g.h, 'post', `/runs/${toDiscard}/actions/discard`, g.managerToken)).status).toBe(202);
        expect((await api(g.h, 'get', `/runs/${toDiscard}`, g.acme.organizationToken)).body.data.attributes.status).toBe('discarded');
      });

      it("answers 404 for another organization's run, a team without access and a missing run", async () => {
        const runId = await createRun(g.h, g.acme.organizationToken, g.acme.workspaceId);
        for (const action of ['apply', 'cancel', 'discard']) {
          expectNotFound(await api(g.h, 'post', `/runs/${runId}/actions/${action}`, g.other.organizationToken));
          expectNotFound(await api(g.h, 'post', `/runs/${runId}/actions/${action}`, g.outsiderToken));
          expectNotFound(await api(g.h, 'post', `/runs/run-missing000000000/actions/${action}`, g.h.adminToken));
        }
        expect((await api(g.h, 'get', `/runs/${runId}`, g.acme.organizationToken)).body.data.attributes.status).toBe('pending');
      });
    });
  });
});
