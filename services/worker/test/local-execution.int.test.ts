import { describe, expect, it } from '@jest/globals';
import { issueCallbackToken } from '@runtasks/shared/security';
import { nativePool } from '@runtasks/shared/db';
import { advanceRun, ATTEMPT_LEASE_MS, immediateExecutor, resultDeadlines } from '@runtasks/shared/engine';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import { api, createRun, eventually, seedOrganization } from '../../../test/support/fixtures.ts';
import { CHANGING_PLAN, CHANGING_PLAN_COUNTS, NO_CHANGE_PLAN } from '../../../test/support/plan-documents.ts';
import { PLAN_JSON_MAX_BYTES } from './local-execution/limits.ts';
import { useLocalExecution } from './local-execution/setup.ts';

/**
 * Local execution, end to end: the API and a worker on real PostgreSQL and Redis, a real task server
 * that reads each stage's plan, and the reports a pipeline sends. A small PLAN_JSON_MAX_BYTES makes the
 * size limit cheap to reach.
 */
describe('local execution: runs that wait for their pipeline to report plan and apply', () => {
  const g = useLocalExecution();
  const { run, waitFor, stored, putPlan, readsOf } = g;

  it('a workspace takes execution-mode local or remote; agent is refused at its pointer', async () => {
    const shown = await api(g.h, 'get', `/workspaces/${g.localWorkspaceId}`, g.f.organizationToken);
    expect(shown.body.data.attributes['execution-mode']).toBe('local');
    expect((await api(g.h, 'get', `/workspaces/${g.f.workspaceId}`, g.f.organizationToken)).body.data.attributes['execution-mode']).toBe(
      'remote',
    );
    const agent = await api(g.h, 'patch', `/workspaces/${g.f.workspaceId}`, g.f.organizationToken, {
      data: { type: 'workspaces', attributes: { 'execution-mode': 'agent' } },
    });
    expectError(agent, 422, '/data/attributes/execution-mode');
    expect((await api(g.h, 'get', `/workspaces/${g.f.workspaceId}`, g.f.organizationToken)).body.data.attributes['execution-mode']).toBe(
      'remote',
    );
  });

  it('stops at planning and applying until each is reported, with counts from the plan; the task server reads the reported plan', async () => {
    const runId = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId, { message: 'pipeline run' });
    await waitFor(runId, 'planning');
    // However often the run is woken, it waits for its pipeline.
    const pool = await nativePool(g.h.orm.em);
    const settings = {
      ...resultDeadlines(g.h.config),
      attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
      issueToken: (resultId: string) => issueCallbackToken(g.h.secrets, resultId),
    };
    await advanceRun(g.h.orm.em.fork(), pool, runId, immediateExecutor, settings);
    const waiting = await run(runId);
    expect(waiting.data.attributes.status).toBe('planning');
    const planId = waiting.data.relationships.plan.data.id as string;
    const applyId = waiting.data.relationships.apply.data.id as string;
    expect(applyId).toMatch(/^apply-[A-Za-z0-9]{16}$/);
    const plan = waiting.included.find((resource: { type: string }) => resource.type === 'plans');
    expect(plan.attributes).toMatchObject({ status: 'running', 'has-changes': false, 'execution-details': { mode: 'local' } });
    expect(waiting.included.find((resource: { type: string }) => resource.type === 'applies').attributes.status).toBe('pending');

    const reported = await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN), g.plannerToken);
    expect(reported.status).toBe(200);
    expect(reported.body.data).toMatchObject({
      id: planId,
      type: 'plans',
      attributes: { status: 'finished', 'has-changes': true, ...CHANGING_PLAN_COUNTS },
    });
    await waitFor(runId, 'post_plan_completed');
    // The post_plan task read exactly what the pipeline reported, at plan_json_api_url.
    expect(readsOf(runId, 'post_plan')).toEqual([{ stage: 'post_plan', runId, plan: CHANGING_PLAN, planStatus: 200 }]);
    expect((await run(runId)).data.attributes['has-changes']).toBe(true);

    expect((await api(g.h, 'post', `/runs/${runId}/actions/apply`, g.f.organizationToken, {})).status).toBe(202);
    await waitFor(runId, 'applying');
    await advanceRun(g.h.orm.em.fork(), pool, runId, immediateExecutor, settings);
    expect((await api(g.h, 'get', `/runs/${runId}/apply`, g.f.organizationToken)).body.data.attributes.status).toBe('running');
    expect((await run(runId)).data.attributes.status).toBe('applying');

    // A token that may plan but not apply cannot report the apply: it reads the run, so it is told what it lacks.
    expect(expectError(await api(g.h, 'post', `/applies/${applyId}/actions/finish`, g.plannerToken), 403).detail).toBe(
      'This token may read the run but may not report the run\'s apply: that takes the "apply" runs permission on the workspace.',
    );
    expect((await run(runId)).data.attributes.status).toBe('applying');
    const applied = await api(g.h, 'post', `/applies/${applyId}/actions/finish`, g.f.organizationToken);
    expect(applied.status).toBe(200);
    expect(applied.body.data).toMatchObject({ id: applyId, type: 'applies', attributes: { status: 'finished', ...CHANGING_PLAN_COUNTS } });
    await waitFor(runId, 'post_apply_completed');
    expect(readsOf(runId, 'post_apply')).toHaveLength(1);
    const ended = await run(runId);
    expect(Object.keys(ended.data.attributes['status-timestamps'])).toEqual(
      expect.arrayContaining(['planning-at', 'planned-at', 'applying-at', 'applied-at', 'post-apply-completed-at']),
    );
  });

  it('reports by run id too; errored reports end the run errored with their message, and its later stages never run', async () => {
    const planErrored = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    await waitFor(planErrored, 'planning');
    const res = await api(g.h, 'post', `/runs/${planErrored}/plan/actions/error`, g.f.organizationToken, {
      message: 'terraform plan failed: invalid provider configuration',
    });
    expect(res.status).toBe(200);
    expect(res.body.data.attributes).toMatchObject({
      status: 'errored',
      'error-message': 'terraform plan failed: invalid provider configuration',
    });
    await waitFor(planErrored, 'errored');
    const stages = await api(g.h, 'get', `/runs/${planErrored}/task-stages`, g.f.organizationToken);
    const statusOf = (stage: string) => stages.body.data.find((s: { attributes: { stage: string } }) => s.attributes.stage === stage);
    await eventually(async () => {
      const current = await api(g.h, 'get', `/runs/${planErrored}/task-stages`, g.f.organizationToken);
      const post = current.body.data.find((s: { attributes: { stage: string } }) => s.attributes.stage === 'post_plan');
      return post.attributes.status === 'canceled' ? true : undefined;
    });
    expect(statusOf('pre_plan').attributes.status).toBe('passed');
    expect((await api(g.h, 'get', `/runs/${planErrored}/apply`, g.f.organizationToken)).body.data.attributes.status).toBe('unreachable');

    const applyErrored = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId, { 'auto-apply': true });
    await waitFor(applyErrored, 'planning');
    expect((await putPlan(`/runs/${applyErrored}/plan/json-output`, JSON.stringify(CHANGING_PLAN))).status).toBe(200);
    await waitFor(applyErrored, 'applying');
    const failed = await api(g.h, 'post', `/runs/${applyErrored}/apply/actions/error`, g.f.organizationToken, {
      message: 'apply failed: quota',
    });
    expect(failed.body.data.attributes).toMatchObject({ status: 'errored', 'error-message': 'apply failed: quota' });
    await waitFor(applyErrored, 'errored');
    expect((await api(g.h, 'get', `/runs/${applyErrored}/plan`, g.f.organizationToken)).body.data.attributes.status).toBe('finished');
    expect(readsOf(applyErrored, 'post_apply')).toEqual([]);
  });

  it('refuses reports out of order (409), from those who may only read the run (403) or not see it (404), changing nothing', async () => {
    const runId = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    await waitFor(runId, 'planning');
    const before = await stored(runId);
    const { planId, applyId } = await (async () => {
      const body = await run(runId);
      return { planId: body.data.relationships.plan.data.id as string, applyId: body.data.relationships.apply.data.id as string };
    })();
    // An apply before its plan.
    expectError(await api(g.h, 'post', `/applies/${applyId}/actions/finish`, g.f.organizationToken), 409);
    expectError(await api(g.h, 'post', `/runs/${runId}/apply/actions/error`, g.f.organizationToken, { message: 'x' }), 409);
    // A token that may only read the workspace (told what it lacks), one of another organization, an unknown plan.
    expect(expectError(await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN), g.readerToken), 403).detail).toContain(
      'the "plan" or "apply" runs permission',
    );
    const other = await seedOrganization(g.h, uniqueName('other'));
    expectNotFound(await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN), other.organizationToken));
    expectNotFound(await putPlan(`/plans/plan-doesnotexist0000/json-output`, JSON.stringify(CHANGING_PLAN)));
    expect(await stored(runId)).toEqual(before);

    // The plan, then another plan, then a failure after it.
    expect((await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN))).status).toBe(200);
    await waitFor(runId, 'post_plan_completed');
    const planned = await stored(runId);
    const again = await putPlan(`/plans/${planId}/json-output`, JSON.stringify(NO_CHANGE_PLAN));
    expect(expectError(again, 409).title).toBe('conflicting report');
    const late = await api(g.h, 'post', `/plans/${planId}/actions/error`, g.f.organizationToken, { message: 'late' });
    expect(expectError(late, 409).title).toBe('conflicting report');
    expect(await stored(runId)).toEqual(planned);

    // A run of a remote workspace takes no reports.
    const remote = await createRun(g.h, g.f.organizationToken, g.f.workspaceId);
    await waitFor(remote, 'planned');
    const remoteBefore = await stored(remote);
    expectError(await putPlan(`/runs/${remote}/plan/json-output`, JSON.stringify(CHANGING_PLAN)), 409);
    expectError(await api(g.h, 'post', `/runs/${remote}/apply/actions/finish`, g.f.organizationToken), 409);
    expect(await stored(remote)).toEqual(remoteBefore);
  });

  it('of reports racing for one run, exactly one is taken; the others are 409s', async () => {
    const runId = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    await waitFor(runId, 'planning');
    const answers = await Promise.all([
      putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(CHANGING_PLAN)),
      putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(NO_CHANGE_PLAN)),
      api(g.h, 'post', `/runs/${runId}/plan/actions/error`, g.f.organizationToken, { message: 'racing' }),
    ]);
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(2);
    const winner = answers.findIndex((answer) => answer.status === 200);
    const row = await stored(runId);
    // A taken plan moves the run on at once: the workspace's post-plan task may already be under way.
    if (winner === 2) expect(row?.['status']).toBe('errored');
    else expect(['planned', 'post_plan_running', 'post_plan_completed']).toContain(row?.['status']);
    expect(row?.['has_changes']).toBe(winner === 0);
  });

  it('refuses a plan that is not JSON (400), not a plan (422 at its pointer), too large (413) or not application/json (415), changing nothing', async () => {
    const runId = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    await waitFor(runId, 'planning');
    const before = await stored(runId);
    const path = `/runs/${runId}/plan/json-output`;
    expectError(await putPlan(path, '{"format_version":'), 400);
    expect(expectError(await putPlan(path, JSON.stringify({ values: {} })), 422, '/format_version').title).toBe('invalid plan');
    expectError(await putPlan(path, JSON.stringify({ format_version: '1.2', values: {} })), 422, '');
    expectError(await putPlan(path, JSON.stringify({ format_version: '1.2', resource_changes: {} })), 422, '/resource_changes');
    const badActions = { format_version: '1.2', resource_changes: [{ address: 'a.b', change: { actions: 'create' } }] };
    expectError(await putPlan(path, JSON.stringify(badActions)), 422, '/resource_changes/0/change/actions');
    expectError(await putPlan(path, JSON.stringify([CHANGING_PLAN])), 422, '');
    const oversized = { ...CHANGING_PLAN, padding: 'x'.repeat(PLAN_JSON_MAX_BYTES) };
    expectError(await putPlan(path, JSON.stringify(oversized)), 413);
    expectError(await putPlan(path, JSON.stringify(CHANGING_PLAN), g.f.organizationToken, 'text/plain'), 415);
    expect(await stored(runId)).toEqual(before);
    expect((await run(runId)).data.attributes.status).toBe('planning');
  });

  it('a plan without changes runs its post_plan tasks, then ends planned_and_finished even with auto-apply; nothing to confirm', async () => {
    const runId = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId, { 'auto-apply': true });
    await waitFor(runId, 'planning');
    const reported = await putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(NO_CHANGE_PLAN));
    expect(reported.body.data.attributes).toMatchObject({
      status: 'finished',
      'has-changes': false,
      'resource-additions': 0,
      'resource-changes': 0,
      'resource-destructions': 0,
      'resource-imports': 0,
    });
    await waitFor(runId, 'planned_and_finished');
    expect(readsOf(runId, 'post_plan')).toEqual([{ stage: 'post_plan', runId, plan: NO_CHANGE_PLAN, planStatus: 200 }]);
    const ended = await run(runId);
    expect(ended.data.attributes['has-changes']).toBe(false);
    expect(ended.data.attributes.actions['is-confirmable']).toBe(false);
    expect(ended.included.find((resource: { type: string }) => resource.type === 'applies').attributes.status).toBe('unreachable');
    expectError(await api(g.h, 'post', `/runs/${runId}/actions/apply`, g.f.organizationToken, {}), 409);
    await eventually(async () => {
      const stages = await api(g.h, 'get', `/runs/${runId}/task-stages`, g.f.organizationToken);
      const statuses = Object.fromEntries(
        stages.body.data.map((s: { attributes: { stage: string; status: string } }) => [s.attributes.stage, s.attributes.status]),
      );
      return statuses['pre_apply'] === 'canceled' ? statuses : undefined;
    }).then((statuses) =>
      expect(statuses).toEqual({ pre_plan: 'passed', post_plan: 'passed', pre_apply: 'canceled', post_apply: 'canceled' }),
    );
  });

  it("built-in (remote) runs show their plan and apply, finished, with the plan-json's counts", async () => {
    const runId = await createRun(g.h, g.f.organizationToken, g.f.workspaceId, { 'auto-apply': true, 'plan-json': CHANGING_PLAN });
    await waitFor(runId, 'applied');
    const body = await run(runId);
    expect(body.data.attributes['has-changes']).toBe(true);
    const plan = body.included.find((resource: { type: string }) => resource.type === 'plans');
    const apply = body.included.find((resource: { type: string }) => resource.type === 'applies');
    expect(plan.attributes).toMatchObject({
      status: 'finished',
      'has-changes': true,
      'execution-details': { mode: 'remote' },
      ...CHANGING_PLAN_COUNTS,
    });
    expect(apply.attributes).toMatchObject({ status: 'finished', ...CHANGING_PLAN_COUNTS });
    expect((await api(g.h, 'get', `/plans/${plan.id}`, g.f.organizationToken)).body.data).toEqual(plan);
    expect((await api(g.h, 'get', `/applies/${apply.id}`, g.f.organizationToken)).body.data).toEqual(apply);
  });
});
