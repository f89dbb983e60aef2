import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { api, attachTask, createRun, createTask, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { CHANGING_PLAN, startPlanReader } from '../../../test/support/plan-documents.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';

/**
 * A pipeline that disappears: a local run left waiting for its report ends errored once
 * LOCAL_PLAN_TIMEOUT_SECONDS (at planning) or LOCAL_APPLY_TIMEOUT_SECONDS (at applying) have passed,
 * found by the sweeper as any idle run is. Short timeouts and sweeper interval keep the file fast; a
 * report that comes in time is unaffected.
 */
const TIMEOUT_SECONDS = 2;
const APPLY_TIMEOUT_SECONDS = 3;

describe('the local execution timeout', () => {
  let h: Harness;
  let worker: RunningWorker;
  let reader: Awaited<ReturnType<typeof startPlanReader>>;
  let f: Fixture;
  let workspaceId: string;

  beforeAll(async () => {
    h = await startHarness({
      reachableBaseUrl: true,
      env: {
        SWEEPER_INTERVAL_SECONDS: '0.5',
        LOCAL_PLAN_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS),
        LOCAL_APPLY_TIMEOUT_SECONDS: String(APPLY_TIMEOUT_SECONDS),
      },
    });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    reader = await startPlanReader();
    f = await seedOrganization(h, 'timeout');
    const created = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'pipeline', 'execution-mode': 'local' } },
    });
    workspaceId = created.body.data.id as string;
    await attachTask(h, f, workspaceId, await createTask(h, f, reader.url), 'mandatory', ['post_plan', 'post_apply']);
  });
  afterAll(async () => {
    await worker.close();
    await new Promise((resolve) => reader.server.close(resolve));
    await h.close();
  });

  const show = async (runId: string) => (await api(h, 'get', `/runs/${runId}?include=plan,apply,task_stages`, f.organizationToken)).body;
  const ended = (runId: string) =>
    eventually(
      async () => {
        const body = await show(runId);
        return body.data.attributes.status === 'errored' ? body : undefined;
      },
      (APPLY_TIMEOUT_SECONDS + 15) * 1000,
    );
  const included = (body: { included: { type: string; attributes: Record<string, unknown> }[] }, type: string) =>
    body.included.filter((resource) => resource.type === type).map((resource) => resource.attributes);

  it('a run whose plan never comes ends errored after the timeout, saying so; its stages are canceled', async () => {
    const runId = await createRun(h, f.organizationToken, workspaceId);
    const body = await ended(runId);
    const [plan] = included(body, 'plans');
    expect(plan).toMatchObject({ status: 'errored' });
    expect(plan?.['error-message']).toMatch(/reported no plan within 2 seconds \(LOCAL_PLAN_TIMEOUT_SECONDS\)/);
    const started = Date.parse(body.data.attributes['status-timestamps']['planning-at']);
    expect(Date.parse(body.data.attributes['status-timestamps']['errored-at']) - started).toBeGreaterThanOrEqual(TIMEOUT_SECONDS * 1000);
    expect(included(body, 'applies')).toEqual([expect.objectContaining({ status: 'unreachable' })]);
    await eventually(async () => {
      const stages = included(await show(runId), 'task-stages');
      return stages.every((stage) => stage['status'] === 'canceled') ? true : undefined;
    });
    // A report after the timeout is too late: the plan ended errored, and this one is no repeat of that.
    const late = await h.http
      .put(`/api/v2/runs/${runId}/plan/json-output`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(CHANGING_PLAN));
    expect(late.status).toBe(409);
    expect(late.body.errors[0]).toMatchObject({ title: 'conflicting report', meta: { taken: { outcome: 'errored' } } });
    expect(late.body.errors[0].detail).toContain('LOCAL_PLAN_TIMEOUT_SECONDS');
  });

  it('a run the timeout ended frees its workspace: the run queued behind it starts', async () => {
    const abandoned = await createRun(h, f.organizationToken, workspaceId);
    await eventually(async () => ((await show(abandoned)).data.attributes.status === 'planning' ? true : undefined));
    const next = await createRun(h, f.organizationToken, workspaceId);
    const waiting = (await show(next)).data.attributes;
    expect(waiting.status).toBe('pending');
    expect(waiting['waiting-for']).toMatchObject({ position: 1, run: { id: abandoned, status: 'planning' } });
    await ended(abandoned);
    await eventually(async () => ((await show(next)).data.attributes.status === 'planning' ? true : undefined));
    expect((await show(next)).data.attributes['waiting-for']).toBeNull();
    await api(h, 'post', `/runs/${next}/actions/cancel`, f.organizationToken, {});
  });

  it('a run whose apply never comes ends errored after the timeout; its plan stays finished', async () => {
    const runId = await createRun(h, f.organizationToken, workspaceId, { 'auto-apply': true });
    await eventually(async () => ((await show(runId)).data.attributes.status === 'planning' ? true : undefined));
    const reported = await h.http
      .put(`/api/v2/runs/${runId}/plan/json-output`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(CHANGING_PLAN));
    expect(reported.status).toBe(200);
    const body = await ended(runId);
    expect(body.data.attributes['status-timestamps']).toHaveProperty('applying-at');
    expect(included(body, 'plans')).toEqual([expect.objectContaining({ status: 'finished' })]);
    const [apply] = included(body, 'applies');
    expect(apply).toMatchObject({ status: 'errored' });
    expect(apply?.['error-message']).toMatch(/reported no apply within 3 seconds \(LOCAL_APPLY_TIMEOUT_SECONDS\)/);
    const timestamps = body.data.attributes['status-timestamps'];
    expect(Date.parse(timestamps['errored-at']) - Date.parse(timestamps['applying-at'])).toBeGreaterThanOrEqual(
      APPLY_TIMEOUT_SECONDS * 1000,
    );
  });
});
