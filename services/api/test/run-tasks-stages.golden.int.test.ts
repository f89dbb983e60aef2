import { beforeAll, describe, expect, it } from '@jest/globals';
import { uniqueName } from '../../../test/support/assertions.ts';
import { api, createRun, seedOrganization } from '../../../test/support/fixtures.ts';
import {
  asCreated,
  expectIncludeError,
  expectPagination,
  expectStatus,
  expectTaskResult,
  expectTaskStage,
  expectWorkspace,
  ID,
  type Stage,
} from './run-tasks-golden/documents.ts';
import { useRunTasksGolden } from './run-tasks-golden/setup.ts';

/**
 * Golden tests: every run task endpoint, request and response, checked field by field against
 * what go-tfe, the provider and the Terraform CLI decode (docs/api.md, "Compatibility").
 * Documents are compared whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails.
 */
describe('run tasks API golden documents', () => {
  const g = useRunTasksGolden();
  const { newTask, newAssociation, stagesOf, runWithTask } = g;

  describe('task stages', () => {
    it('two workspace tasks on post_plan → one post_plan stage holding two results with workspace-task-id and task-name', async () => {
      const fixture = await seedOrganization(g.h, uniqueName('golden-two'));
      const alpha = await newTask(fixture);
      const beta = await newTask(fixture);
      const alphaAssociation = await newAssociation(fixture, fixture.workspaceId, alpha.id, { 'enforcement-level': 'mandatory' });
      const betaAssociation = await newAssociation(fixture, fixture.workspaceId, beta.id, {
        'enforcement-level': 'advisory',
        stage: 'post_plan',
      });
      const runId = await createRun(g.h, fixture.organizationToken, fixture.workspaceId);

      const res = await api(g.h, 'get', `/runs/${runId}/task-stages?include=task_results`, fixture.organizationToken);
      expectStatus(res, 200);
      expectPagination(res, 1);
      expect(res.body.data).toHaveLength(1);
      const resultIds = (res.body.data[0].relationships['task-results'].data as { id: string }[]).map((result) => result.id);
      expect(resultIds).toHaveLength(2);
      const stageId = expectTaskStage(res.body.data[0], { runId, stage: 'post_plan', status: 'pending', resultIds });
      const included = res.body.included as { id: string; attributes: { 'task-name': string } }[];
      expect(included.map((resource) => resource.id).sort()).toEqual([...resultIds].sort());
      const byName = new Map(included.map((resource) => [resource.attributes['task-name'], resource]));
      const common = { stageId, taskUrl: g.taskServer.url, stage: 'post_plan' as const };
      expectTaskResult(byName.get(alpha.name), {
        ...common,
        taskId: alpha.id,
        taskName: alpha.name,
        workspaceTaskId: alphaAssociation,
        enforcement: 'mandatory',
      });
      expectTaskResult(byName.get(beta.name), {
        ...common,
        taskId: beta.id,
        taskName: beta.name,
        workspaceTaskId: betaAssociation,
        enforcement: 'advisory',
      });
    });

    it('GET /runs/:id/task-stages without include (one statement) → the documents the list with include has, results in the same order', async () => {
      const fixture = await seedOrganization(g.h, uniqueName('golden-three'));
      for (let index = 0; index < 3; index += 1) {
        const task = await newTask(fixture);
        await newAssociation(fixture, fixture.workspaceId, task.id, { 'enforcement-level': 'advisory', stages: ['pre_plan', 'post_plan'] });
      }
      const runId = await createRun(g.h, fixture.organizationToken, fixture.workspaceId);
      const plain = await stagesOf(fixture, runId);
      const included = await api(g.h, 'get', `/runs/${runId}/task-stages?include=task_results`, fixture.organizationToken);
      expectStatus(included, 200);
      expect(plain.body.data).toEqual(included.body.data);
      const resultIds = (plain.body.data as { relationships: { 'task-results': { data: { id: string }[] } } }[]).map((stage) =>
        stage.relationships['task-results'].data.map((result) => result.id),
      );
      expect(resultIds.map((ids) => ids.length)).toEqual([3, 3]);
    });

    it('GET /runs/:id/task-stages: stages in lifecycle order pre_plan, post_plan, pre_apply, post_apply; paginated with meta', async () => {
      const { fixture, runId, stageIds, taskId, taskName, workspaceTaskId } = await runWithTask([
        'post_apply',
        'pre_apply',
        'post_plan',
        'pre_plan',
      ]);
      const res = await stagesOf(fixture, runId);
      expectPagination(res, 4);
      expect((res.body.data as { attributes: { stage: string } }[]).map((stage) => stage.attributes.stage)).toEqual([
        'pre_plan',
        'post_plan',
        'pre_apply',
        'post_apply',
      ]);
      for (const resource of res.body.data as { relationships: { 'task-results': { data: { id: string }[] } } }[]) {
        expect(resource.relationships['task-results'].data).toHaveLength(1);
      }
      const stages: Stage[] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];
      (res.body.data as unknown[]).forEach((resource, index) => {
        const resultIds = (resource as { relationships: { 'task-results': { data: { id: string }[] } } }).relationships[
          'task-results'
        ].data.map((result) => result.id);
        const stage = stages[index] ?? 'pre_plan';
        expectTaskStage(resource, { runId, stage, ...asCreated(stage), resultIds });
      });
      // The run lists the same stages in the same order.
      const run = await api(g.h, 'get', `/runs/${runId}`, fixture.organizationToken);
      expect(run.body.data.relationships['task-stages'].data).toEqual(stageIds.map((id) => ({ id, type: 'task-stages' })));

      const second = await api(g.h, 'get', `/runs/${runId}/task-stages?page%5Bnumber%5D=2&page%5Bsize%5D=1`, fixture.organizationToken);
      expectStatus(second, 200);
      expectPagination(second, 4, 2, 1);
      expect((second.body.data as { id: string }[]).map((stage) => stage.id)).toEqual([stageIds[1]]);
      const beyond = await api(g.h, 'get', `/runs/${runId}/task-stages?page%5Bnumber%5D=3&page%5Bsize%5D=2`, fixture.organizationToken);
      expectStatus(beyond, 200);
      expect(beyond.body.data).toEqual([]);
      expect(beyond.body.meta.pagination).toMatchObject({ 'current-page': 3, 'total-count': 4, 'total-pages': 2, 'next-page': null });

      // Each result names its task and stage.
      const withResults = await api(g.h, 'get', `/runs/${runId}/task-stages?include=task-results`, fixture.organizationToken);
      const results = withResults.body.included as { attributes: { stage: string } }[];
      expect(results.map((result) => result.attributes.stage).sort()).toEqual([...stages].sort());
      for (const result of results) {
        const stage = (withResults.body.data as { id: string; attributes: { stage: string } }[]).find(
          (candidate) => candidate.attributes.stage === result.attributes.stage,
        );
        expectTaskResult(result, {
          stageId: stage?.id ?? '',
          taskId,
          taskName,
          taskUrl: g.taskServer.url,
          stage: result.attributes.stage as Stage,
          workspaceTaskId,
          enforcement: 'mandatory',
          ...asCreated(result.attributes.stage as Stage),
        });
      }
    });

    it('a plan-only run enters pre_plan and post_plan only, its results speculative', async () => {
      const fixture = await seedOrganization(g.h, uniqueName('golden-spec'));
      const task = await newTask(fixture);
      const workspaceTaskId = await newAssociation(fixture, fixture.workspaceId, task.id, {
        'enforcement-level': 'advisory',
        stages: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'],
      });
      const runId = await createRun(g.h, fixture.organizationToken, fixture.workspaceId, { 'plan-only': true });
      const res = await api(g.h, 'get', `/runs/${runId}/task-stages?include=task_results`, fixture.organizationToken);
      expectStatus(res, 200);
      expect((res.body.data as { attributes: { stage: string } }[]).map((stage) => stage.attributes.stage)).toEqual([
        'pre_plan',
        'post_plan',
      ]);
      for (const stage of res.body.data as { id: string; attributes: { stage: Stage } }[]) {
        const result = (res.body.included as { relationships: { 'task-stage': { data: { id: string } } } }[]).find(
          (candidate) => candidate.relationships['task-stage'].data.id === stage.id,
        );
        expectTaskResult(result, {
          stageId: stage.id,
          taskId: task.id,
          taskName: task.name,
          taskUrl: g.taskServer.url,
          stage: stage.attributes.stage,
          workspaceTaskId,
          enforcement: 'advisory',
          isSpeculative: true,
          ...asCreated(stage.attributes.stage),
        });
      }
    });

    describe('show and include', () => {
      let run: Awaited<ReturnType<typeof runWithTask>>;
      let resultIds: string[];
      let postPlanId: string;

      beforeAll(async () => {
        run = await runWithTask(['pre_plan', 'post_plan']);
        postPlanId = run.stageIds[1] ?? '';
        const stage = await api(g.h, 'get', `/task-stages/${postPlanId}`, run.fixture.organizationToken);
        resultIds = (stage.body.data.relationships['task-results'].data as { id: string }[]).map((result) => result.id);
      });

      it('show → 200 with the whole task-stages document; without include, results are ids only', async () => {
        const res = await api(g.h, 'get', `/task-stages/${postPlanId}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expect(Object.keys(res.body)).toEqual(['data']);
        expect(resultIds).toHaveLength(1);
        expect(resultIds[0]).toMatch(ID.taskResult);
        expectTaskStage(res.body.data, { runId: run.runId, stage: 'post_plan', status: 'pending', resultIds });
        expect(res.body.data.id).toBe(postPlanId);
      });

      it.each([
        'run,run.workspace,task_results,policy_evaluations',
        'run,run.workspace,task-results,policy-evaluations',
        'task_results,run.workspace',
      ])('show ?include=%s → the run, its workspace and the results as included documents', async (include) => {
        const res = await api(g.h, 'get', `/task-stages/${postPlanId}?include=${include}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expectTaskStage(res.body.data, { runId: run.runId, stage: 'post_plan', status: 'pending', resultIds });
        const included = res.body.included as { type: string; id: string }[];
        expect(included.map((resource) => `${resource.type}/${resource.id}`).sort()).toEqual(
          [`runs/${run.runId}`, `workspaces/${run.fixture.workspaceId}`, `task-results/${resultIds[0]}`].sort(),
        );
        // The included run is the run's own document (all of its task stages, not only this one).
        const ownRun = await api(g.h, 'get', `/runs/${run.runId}`, run.fixture.organizationToken);
        expect(included.find((resource) => resource.type === 'runs')).toEqual(ownRun.body.data);
        expectWorkspace(
          included.find((resource) => resource.type === 'workspaces'),
          run.fixture.workspaceId,
          `${run.fixture.organization}-ws`,
          run.fixture.organization,
        );
        expectTaskResult(
          included.find((resource) => resource.type === 'task-results'),
          {
            stageId: postPlanId,
            taskId: run.taskId,
            taskName: run.taskName,
            taskUrl: g.taskServer.url,
            stage: 'post_plan',
            workspaceTaskId: run.workspaceTaskId,
            enforcement: 'mandatory',
          },
        );
      });

      it.each(['run', 'policy_evaluations', 'policy-evaluations'])('show ?include=%s → only what was asked for', async (include) => {
        const res = await api(g.h, 'get', `/task-stages/${postPlanId}?include=${include}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        const types = ((res.body.included ?? []) as { type: string }[]).map((resource) => resource.type);
        expect(types).toEqual(include === 'run' ? ['runs'] : []);
      });

      it('list ?include=run,run.workspace → the run and workspace once, and the run equals its own document', async () => {
        const res = await api(g.h, 'get', `/runs/${run.runId}/task-stages?include=run,run.workspace`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expectPagination(res, 2);
        const included = res.body.included as { type: string; id: string }[];
        expect(included.map((resource) => `${resource.type}/${resource.id}`).sort()).toEqual(
          [`runs/${run.runId}`, `workspaces/${run.fixture.workspaceId}`].sort(),
        );
        const ownRun = await api(g.h, 'get', `/runs/${run.runId}`, run.fixture.organizationToken);
        expect(included.find((resource) => resource.type === 'runs')).toEqual(ownRun.body.data);
        // On a page holding one stage, the run still lists both of its stages.
        const paged = await api(g.h, 'get', `/runs/${run.runId}/task-stages?include=run&page%5Bsize%5D=1`, run.fixture.organizationToken);
        expectStatus(paged, 200);
        expectPagination(paged, 2, 1, 1);
        expect(paged.body.included).toEqual([ownRun.body.data]);
      });

      it.each(['tasks', 'workspace', 'run.plan', 'task_results.outcomes'])(
        'unknown ?include=%s → 400 naming the include parameter (show and list)',
        async (include) => {
          expectIncludeError(await api(g.h, 'get', `/task-stages/${postPlanId}?include=${include}`, run.fixture.organizationToken));
          expectIncludeError(await api(g.h, 'get', `/runs/${run.runId}/task-stages?include=${include}`, run.fixture.organizationToken));
        },
      );
    });
  });
});
