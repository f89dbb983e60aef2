import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { issueCallbackToken } from '@runtasks/shared/security';
import { nativePool } from '@runtasks/shared/db';
import { resultDeadlines } from '@runtasks/shared/engine';
import { type RunStage } from '@runtasks/shared/domain';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createTeam,
  createTeamToken,
  eventually,
  grantWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  CHANGING_PLAN,
  CHANGING_PLAN_COUNTS,
  NO_CHANGE_PLAN,
  startPlanReader,
  type PlanRead,
} from '../../../test/support/plan-documents.ts';
import { advanceRun, ATTEMPT_LEASE_MS, immediateExecutor } from '@runtasks/shared/engine';
import { startWorker, type RunningWorker } from '../src/worker.ts';

/**
 * Local execution, end to end: the API and a worker on real PostgreSQL and Redis, a real task server
 * that reads each stage's plan, and the reports a pipeline sends. A small PLAN_JSON_MAX_BYTES makes the
 * size limit cheap to reach.
 */
const PLAN_JSON_MAX_BYTES = 64 * 1024;
const ALL_STAGES: RunStage[] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];

describe('local execution: runs that wait for their pipeline to report plan and apply', () => {
  let h: Harness;
  let worker: RunningWorker;
  let reader: Awaited<ReturnType<typeof startPlanReader>>;
  let f: Fixture;
  let localWorkspaceId: string;
  let readerToken: string;
  let plannerToken: string;

  // One run at a time holds a workspace (the run queue), and these runs wait for their pipeline or for a
  // confirmation: each test starts with the shared workspaces free. Newest first, so no run is admitted
  // while this ends them.
  beforeEach(async () => {
    if (!localWorkspaceId) return;
    for (const workspaceId of [localWorkspaceId, f.workspaceId]) {
      const listed = await api(h, 'get', `/workspaces/${workspaceId}/runs?page%5Bsize%5D=100`, f.organizationToken);
      for (const run of listed.body.data as { id: string; attributes: { actions: Record<string, boolean> } }[]) {
        const { actions } = run.attributes;
        const action = actions['is-discardable'] ? 'discard' : actions['is-cancelable'] ? 'cancel' : undefined;
        if (action) expect((await api(h, 'post', `/runs/${run.id}/actions/${action}`, f.organizationToken)).status).toBe(202);
      }
    }
  });

  beforeAll(async () => {
    h = await startHarness({
      reachableBaseUrl: true,
      env: { SWEEPER_INTERVAL_SECONDS: '0.5', PLAN_JSON_MAX_BYTES: String(PLAN_JSON_MAX_BYTES) },
    });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    reader = await startPlanReader();
    f = await seedOrganization(h, 'local');
    localWorkspaceId = await localWorkspace('pipeline');
    await attachTask(h, f, localWorkspaceId, await createTask(h, f, reader.url), 'mandatory', ALL_STAGES);
    const teamToken = async (name: string, access: Record<string, unknown>): Promise<string> => {
      const teamId = await createTeam(h, f.organization, f.organizationToken, name);
      await grantWorkspace(h, f.organizationToken, teamId, localWorkspaceId, access);
      return createTeamToken(h, f.organizationToken, teamId);
    };
    readerToken = await teamToken('readers', { access: 'read' });
    plannerToken = await teamToken('planners', { access: 'custom', runs: 'plan' });
  });
  afterAll(async () => {
    await worker.close();
    await new Promise((resolve) => reader.server.close(resolve));
    await h.close();
  });

  async function localWorkspace(label: string): Promise<string> {
    const res = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: uniqueName(label), 'execution-mode': 'local' } },
    });
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  }

  const run = async (runId: string) => (await api(h, 'get', `/runs/${runId}?include=plan,apply`, f.organizationToken)).body;
  const waitFor = (runId: string, status: string, timeoutMs = 15_000) =>
    eventually(async () => ((await run(runId)).data.attributes.status === status ? true : undefined), timeoutMs);
  /** What a report must leave untouched when it is refused. */
  const stored = async (runId: string) =>
    (
      await h.orm.em
        .fork()
        .execute(`select status, version, plan_json is null as no_plan, has_changes, execution_error from runs where id = ?`, [runId])
    )[0];
  const putPlan = (path: string, body: string, token = f.organizationToken, type = 'application/json') =>
    h.http.put(`/api/v2${path}`).set('Authorization', `Bearer ${token}`).set('Content-Type', type).send(body);
  const readsOf = (runId: string, stage: string): PlanRead[] => reader.reads.filter((read) => read.runId === runId && read.stage === stage);

  it('a workspace takes execution-mode local or remote; agent is refused at its pointer', async () => {
    const shown = await api(h, 'get', `/workspaces/${localWorkspaceId}`, f.organizationToken);
    expect(shown.body.data.attributes['execution-mode']).toBe('local');
    expect((await api(h, 'get', `/workspaces/${f.workspaceId}`, f.organizationToken)).body.data.attributes['execution-mode']).toBe(
      'remote',
    );
    const agent = await api(h, 'patch', `/workspaces/${f.workspaceId}`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { 'execution-mode': 'agent' } },
    });
    expectError(agent, 422, '/data/attributes/execution-mode');
    expect((await api(h, 'get', `/workspaces/${f.workspaceId}`, f.organizationToken)).body.data.attributes['execution-mode']).toBe(
      'remote',
    );
  });

  it('stops at planning and applying until each is reported, with counts from the plan; the task server reads the reported plan', async () => {
    const runId = await createRun(h, f.organizationToken, localWorkspaceId, { message: 'pipeline run' });
    await waitFor(runId, 'planning');
    // However often the run is woken, it waits for its pipeline.
    const pool = await nativePool(h.orm.em);
    const settings = {
      ...resultDeadlines(h.config),
      attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
      issueToken: (resultId: string) => issueCallbackToken(h.secrets, resultId),
    };
    await advanceRun(h.orm.em.fork(), pool, runId, immediateExecutor, settings);
    const waiting = await run(runId);
    expect(waiting.data.attributes.status).toBe('planning');
    const planId = waiting.data.relationships.plan.data.id as string;
    const applyId = waiting.data.relationships.apply.data.id as string;
    expect(applyId).toMatch(/^apply-[A-Za-z0-9]{16}$/);
    const plan = waiting.included.find((resource: { type: string }) => resource.type === 'plans');
    expect(plan.attributes).toMatchObject({ status: 'running', 'has-changes': false, 'execution-details': { mode: 'local' } });
    expect(waiting.included.find((resource: { type: string }) => resource.type === 'applies').attributes.status).toBe('pending');

    const reported = await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN), plannerToken);
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

    expect((await api(h, 'post', `/runs/${runId}/actions/apply`, f.organizationToken, {})).status).toBe(202);
    await waitFor(runId, 'applying');
    await advanceRun(h.orm.em.fork(), pool, runId, immediateExecutor, settings);
    expect((await api(h, 'get', `/runs/${runId}/apply`, f.organizationToken)).body.data.attributes.status).toBe('running');
    expect((await run(runId)).data.attributes.status).toBe('applying');

    // A token that may plan but not apply cannot report the apply.
    expectNotFound(await api(h, 'post', `/applies/${applyId}/actions/finish`, plannerToken));
    expect((await run(runId)).data.attributes.status).toBe('applying');
    const applied = await api(h, 'post', `/applies/${applyId}/actions/finish`, f.organizationToken);
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
    const planErrored = await createRun(h, f.organizationToken, localWorkspaceId);
    await waitFor(planErrored, 'planning');
    const res = await api(h, 'post', `/runs/${planErrored}/plan/actions/error`, f.organizationToken, {
      message: 'terraform plan failed: invalid provider configuration',
    });
    expect(res.status).toBe(200);
    expect(res.body.data.attributes).toMatchObject({
      status: 'errored',
      'error-message': 'terraform plan failed: invalid provider configuration',
    });
    await waitFor(planErrored, 'errored');
    const stages = await api(h, 'get', `/runs/${planErrored}/task-stages`, f.organizationToken);
    const statusOf = (stage: string) => stages.body.data.find((s: { attributes: { stage: string } }) => s.attributes.stage === stage);
    await eventually(async () => {
      const current = await api(h, 'get', `/runs/${planErrored}/task-stages`, f.organizationToken);
      const post = current.body.data.find((s: { attributes: { stage: string } }) => s.attributes.stage === 'post_plan');
      return post.attributes.status === 'canceled' ? true : undefined;
    });
    expect(statusOf('pre_plan').attributes.status).toBe('passed');
    expect((await api(h, 'get', `/runs/${planErrored}/apply`, f.organizationToken)).body.data.attributes.status).toBe('unreachable');

    const applyErrored = await createRun(h, f.organizationToken, localWorkspaceId, { 'auto-apply': true });
    await waitFor(applyErrored, 'planning');
    expect((await putPlan(`/runs/${applyErrored}/plan/json-output`, JSON.stringify(CHANGING_PLAN))).status).toBe(200);
    await waitFor(applyErrored, 'applying');
    const failed = await api(h, 'post', `/runs/${applyErrored}/apply/actions/error`, f.organizationToken, {
      message: 'apply failed: quota',
    });
    expect(failed.body.data.attributes).toMatchObject({ status: 'errored', 'error-message': 'apply failed: quota' });
    await waitFor(applyErrored, 'errored');
    expect((await api(h, 'get', `/runs/${applyErrored}/plan`, f.organizationToken)).body.data.attributes.status).toBe('finished');
    expect(readsOf(applyErrored, 'post_apply')).toEqual([]);
  });

  it('refuses reports out of order (409) and from those who may not plan or see the run (404), changing nothing', async () => {
    const runId = await createRun(h, f.organizationToken, localWorkspaceId);
    await waitFor(runId, 'planning');
    const before = await stored(runId);
    const { planId, applyId } = await (async () => {
      const body = await run(runId);
      return { planId: body.data.relationships.plan.data.id as string, applyId: body.data.relationships.apply.data.id as string };
    })();
    // An apply before its plan.
    expectError(await api(h, 'post', `/applies/${applyId}/actions/finish`, f.organizationToken), 409);
    expectError(await api(h, 'post', `/runs/${runId}/apply/actions/error`, f.organizationToken, { message: 'x' }), 409);
    // A token that may only read the workspace, one of another organization, an unknown plan.
    expectNotFound(await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN), readerToken));
    const other = await seedOrganization(h, uniqueName('other'));
    expectNotFound(await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN), other.organizationToken));
    expectNotFound(await putPlan(`/plans/plan-doesnotexist0000/json-output`, JSON.stringify(CHANGING_PLAN)));
    expect(await stored(runId)).toEqual(before);

    // The plan, then the same plan again.
    expect((await putPlan(`/plans/${planId}/json-output`, JSON.stringify(CHANGING_PLAN))).status).toBe(200);
    await waitFor(runId, 'post_plan_completed');
    const planned = await stored(runId);
    const again = await putPlan(`/plans/${planId}/json-output`, JSON.stringify(NO_CHANGE_PLAN));
    expect(expectError(again, 409).title).toBe('transition not allowed');
    expectError(await api(h, 'post', `/plans/${planId}/actions/error`, f.organizationToken, { message: 'late' }), 409);
    expect(await stored(runId)).toEqual(planned);

    // A run of a remote workspace takes no reports.
    const remote = await createRun(h, f.organizationToken, f.workspaceId);
    await waitFor(remote, 'planned');
    const remoteBefore = await stored(remote);
    expectError(await putPlan(`/runs/${remote}/plan/json-output`, JSON.stringify(CHANGING_PLAN)), 409);
    expectError(await api(h, 'post', `/runs/${remote}/apply/actions/finish`, f.organizationToken), 409);
    expect(await stored(remote)).toEqual(remoteBefore);
  });

  it('of reports racing for one run, exactly one is taken; the others are 409s', async () => {
    const runId = await createRun(h, f.organizationToken, localWorkspaceId);
    await waitFor(runId, 'planning');
    const answers = await Promise.all([
      putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(CHANGING_PLAN)),
      putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(NO_CHANGE_PLAN)),
      api(h, 'post', `/runs/${runId}/plan/actions/error`, f.organizationToken, { message: 'racing' }),
    ]);
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    expect(statuses.filter((status) => status === 409)).toHaveLength(2);
    const winner = answers.findIndex((answer) => answer.status === 200);
    const row = await stored(runId);
    expect(row?.['status']).toBe(winner === 2 ? 'errored' : 'planned');
    expect(row?.['has_changes']).toBe(winner === 0);
  });

  it('refuses a plan that is not JSON (400), not a plan (422 at its pointer), too large (413) or not application/json (415), changing nothing', async () => {
    const runId = await createRun(h, f.organizationToken, localWorkspaceId);
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
    expectError(await putPlan(path, JSON.stringify(CHANGING_PLAN), f.organizationToken, 'text/plain'), 415);
    expect(await stored(runId)).toEqual(before);
    expect((await run(runId)).data.attributes.status).toBe('planning');
  });

  it('a plan without changes runs its post_plan tasks, then ends planned_and_finished even with auto-apply; nothing to confirm', async () => {
    const runId = await createRun(h, f.organizationToken, localWorkspaceId, { 'auto-apply': true });
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
    expectError(await api(h, 'post', `/runs/${runId}/actions/apply`, f.organizationToken, {}), 409);
    await eventually(async () => {
      const stages = await api(h, 'get', `/runs/${runId}/task-stages`, f.organizationToken);
      const statuses = Object.fromEntries(
        stages.body.data.map((s: { attributes: { stage: string; status: string } }) => [s.attributes.stage, s.attributes.status]),
      );
      return statuses['pre_apply'] === 'canceled' ? statuses : undefined;
    }).then((statuses) =>
      expect(statuses).toEqual({ pre_plan: 'passed', post_plan: 'passed', pre_apply: 'canceled', post_apply: 'canceled' }),
    );
  });

  it("built-in (remote) runs show their plan and apply, finished, with the plan-json's counts", async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId, { 'auto-apply': true, 'plan-json': CHANGING_PLAN });
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
    expect((await api(h, 'get', `/plans/${plan.id}`, f.organizationToken)).body.data).toEqual(plan);
    expect((await api(h, 'get', `/applies/${apply.id}`, f.organizationToken)).body.data).toEqual(apply);
  });
});
