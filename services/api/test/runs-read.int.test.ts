import { beforeAll, describe, expect, it } from '@jest/globals';
import { Run } from '@runtasks/shared/db';
import { api, createRun, createWorkspace, grantWorkspace, JSON_API, seedOrganization } from '../../../test/support/fixtures.ts';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { attachTask, createRunTask, externalIdOf, resultsInDb, runDocument } from './runs/helpers.ts';
import { useRunsApi } from './runs/setup.ts';

describe('runs API', () => {
  const g = useRunsApi();

  describe('GET /runs/:id', () => {
    let runId: string;
    beforeAll(async () => {
      runId = await createRun(g.h, g.acme.organizationToken, g.acme.workspaceId, { message: 'show me' });
    });

    it('shows a run to the owner, the admin and teams with any runs access', async () => {
      for (const token of [g.acme.organizationToken, g.h.adminToken, g.readerToken, g.plannerToken, g.managerToken]) {
        const res = await api(g.h, 'get', `/runs/${runId}`, token);
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body.data.id).toBe(runId);
        expect(res.body.data.attributes.message).toBe('show me');
        expect(res.body).not.toHaveProperty('included');
      }
    });

    it('answers 404 to a team without access, another organization and for a missing run', async () => {
      expectNotFound(await api(g.h, 'get', `/runs/${runId}`, g.outsiderToken));
      expectNotFound(await api(g.h, 'get', `/runs/${runId}`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'get', '/runs/run-missing000000000', g.h.adminToken));
    });
  });

  describe('GET /workspaces/:id/runs', () => {
    let workspaceId: string;
    let runs: string[];
    beforeAll(async () => {
      workspaceId = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, 'listed-runs');
      await grantWorkspace(g.h, g.acme.organizationToken, g.readersTeamId, workspaceId, { access: 'read' });
      runs = [];
      for (let i = 0; i < 5; i += 1) runs.push(await createRun(g.h, g.acme.organizationToken, workspaceId, { message: `run ${i}` }));
      // Runs created within the same millisecond would tie; space them out so "newest first" is unambiguous.
      const em = g.h.orm.em.fork();
      const base = Date.now() - 60_000;
      for (const [i, id] of runs.entries()) await em.nativeUpdate(Run, { id }, { createdAt: new Date(base + i * 1000) });
    });

    it('lists the runs of a workspace newest first, with pagination meta', async () => {
      const res = await api(g.h, 'get', `/workspaces/${workspaceId}/runs`, g.acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(res.body.data.map((run: { id: string }) => run.id)).toEqual([...runs].reverse());
      expect(res.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 20,
        'prev-page': null,
        'next-page': null,
        'total-pages': 1,
        'total-count': 5,
      });
    });

    it('paginates', async () => {
      const first = await api(g.h, 'get', `/workspaces/${workspaceId}/runs?page[size]=2`, g.acme.organizationToken);
      expect(first.body.data.map((run: { id: string }) => run.id)).toEqual([runs[4], runs[3]]);
      expect(first.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 2,
        'prev-page': null,
        'next-page': 2,
        'total-pages': 3,
        'total-count': 5,
      });
      expect(first.body.links.next).toBe(`http://runtasks.test/api/v2/workspaces/${workspaceId}/runs?page%5Bsize%5D=2&page%5Bnumber%5D=2`);
      expect(first.body.links.prev).toBeNull();

      const last = await api(g.h, 'get', `/workspaces/${workspaceId}/runs?page[size]=2&page[number]=3`, g.acme.organizationToken);
      expect(last.body.data.map((run: { id: string }) => run.id)).toEqual([runs[0]]);
      expect(last.body.meta.pagination).toMatchObject({ 'current-page': 3, 'prev-page': 2, 'next-page': null });

      const beyond = await api(g.h, 'get', `/workspaces/${workspaceId}/runs?page[size]=2&page[number]=9`, g.acme.organizationToken);
      expect(beyond.status).toBe(200);
      expect(beyond.body.data).toEqual([]);

      const invalid = await api(g.h, 'get', `/workspaces/${workspaceId}/runs?page[size]=1000`, g.acme.organizationToken);
      expectError(invalid, 422);
      expect(invalid.body.errors[0].source).toEqual({ parameter: 'page[size]' });
    });

    it('includes task stages when asked', async () => {
      const planning = await seedOrganization(g.h, uniqueName('list-stages'));
      const task = await createRunTask(g.h, await externalIdOf(g.h, planning.organization), 'listed-task');
      await attachTask(g.h, planning.workspaceId, task, ['pre_plan']);
      const a = await createRun(g.h, planning.organizationToken, planning.workspaceId);
      const b = await createRun(g.h, planning.organizationToken, planning.workspaceId);
      const res = await api(g.h, 'get', `/workspaces/${planning.workspaceId}/runs?include=task_stages`, planning.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.included).toHaveLength(2);
      expect(
        res.body.included.map((stage: { relationships: { run: { data: { id: string } } } }) => stage.relationships.run.data.id).sort(),
      ).toEqual([a, b].sort());
      // Each stage with its own run's result (all read in one query, then grouped by stage).
      for (const runId of [a, b]) {
        const stage = res.body.included.find(
          (included: { relationships: { run: { data: { id: string } } } }) => included.relationships.run.data.id === runId,
        );
        expect(stage.relationships['task-results'].data).toEqual(
          (await resultsInDb(g.h, runId)).map((result) => ({ type: 'task-results', id: result.id })),
        );
      }
    });

    it('lists runs to a team with read access, 404 to a team without and to another organization', async () => {
      const res = await api(g.h, 'get', `/workspaces/${workspaceId}/runs`, g.readerToken);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(5);
      expectNotFound(await api(g.h, 'get', `/workspaces/${workspaceId}/runs`, g.outsiderToken));
      expectNotFound(await api(g.h, 'get', `/workspaces/${workspaceId}/runs`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'get', '/workspaces/ws-missing0000000000/runs', g.h.adminToken));
    });

    it('does not list runs of other workspaces', async () => {
      const res = await api(g.h, 'get', `/workspaces/${g.acme.workspaceId}/runs?page[size]=100`, g.acme.organizationToken);
      const ids = res.body.data.map((run: { id: string }) => run.id);
      for (const id of runs) expect(ids).not.toContain(id);
    });
  });

  describe('plan JSON', () => {
    const planJson = {
      format_version: '1.2',
      terraform_version: '1.8.0',
      resource_changes: [{ address: 'null_resource.a', change: { actions: ['create'] } }],
      planned_values: { root_module: { resources: [] } },
    };
    let withPlan: { runId: string; planId: string };
    let withoutPlan: { runId: string; planId: string };
    beforeAll(async () => {
      const a = await api(g.h, 'post', '/runs', g.acme.organizationToken, runDocument(g.acme.workspaceId, { 'plan-json': planJson }));
      withPlan = { runId: a.body.data.id, planId: a.body.data.relationships.plan.data.id };
      const workspaceId = await createWorkspace(g.h, g.acme.organization, g.acme.organizationToken, 'versioned');
      await api(g.h, 'patch', `/workspaces/${workspaceId}`, g.acme.organizationToken, {
        data: { type: 'workspaces', attributes: { 'terraform-version': '1.7.5' } },
      });
      await grantWorkspace(g.h, g.acme.organizationToken, g.readersTeamId, workspaceId, { access: 'read' });
      const b = await api(g.h, 'post', '/runs', g.acme.organizationToken, runDocument(workspaceId));
      withoutPlan = { runId: b.body.data.id, planId: b.body.data.relationships.plan.data.id };
    });

    it('serves the caller-supplied plan JSON at /plans/:plan_id/json-output', async () => {
      const res = await api(g.h, 'get', `/plans/${withPlan.planId}/json-output`, g.acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual(planJson);
    });

    it('serves a minimal plan document when none was supplied', async () => {
      const res = await api(g.h, 'get', `/plans/${withoutPlan.planId}/json-output`, g.readerToken);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        format_version: '1.2',
        terraform_version: '1.7.5',
        planned_values: { root_module: {} },
        resource_changes: [],
        configuration: { root_module: {} },
      });
    });

    it('serves the same document at /runs/:run_id/plan/json-output', async () => {
      const byRun = await api(g.h, 'get', `/runs/${withPlan.runId}/plan/json-output`, g.acme.organizationToken);
      expect(byRun.status).toBe(200);
      expect(byRun.body).toEqual(planJson);
      const minimal = await api(g.h, 'get', `/runs/${withoutPlan.runId}/plan/json-output`, g.acme.organizationToken);
      expect(minimal.body.terraform_version).toBe('1.7.5');
    });

    it('answers 404 to another organization, a team without access, and for unknown ids', async () => {
      expectNotFound(await api(g.h, 'get', `/plans/${withPlan.planId}/json-output`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'get', `/plans/${withPlan.planId}/json-output`, g.outsiderToken));
      expectNotFound(await api(g.h, 'get', `/runs/${withPlan.runId}/plan/json-output`, g.other.organizationToken));
      expectNotFound(await api(g.h, 'get', '/plans/plan-missing00000000/json-output', g.h.adminToken));
      // A run id is not a plan id.
      expectNotFound(await api(g.h, 'get', `/plans/${withPlan.runId}/json-output`, g.h.adminToken));
    });

    it('answers 401 without a token', async () => {
      const res = await api(g.h, 'get', `/plans/${withPlan.planId}/json-output`);
      expect(res.status).toBe(401);
    });
  });
});
