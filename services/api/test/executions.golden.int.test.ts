import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DB_NOW_ISO, nativePool } from '@runtasks/shared/db';
import { expectError, type Response } from '../../../test/support/assertions.ts';
import { api, createRun, JSON_API, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { CHANGING_PLAN, CHANGING_PLAN_COUNTS } from '../../../test/support/plan-documents.ts';

/**
 * Golden tests: plans and applies in the shapes go-tfe's `Plan` and `Apply` read (id, status,
 * status-timestamps with queued-at / started-at / finished-at / errored-at / canceled-at, has-changes,
 * resource-additions / -changes / -destructions / -imports, log-read-url), a run's `plan` and `apply`
 * relationships and `include=plan,apply`, and the workspace's `execution-mode`. Documents are compared
 * whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails. No worker runs: the run is
 * moved to the status a case needs in the database, as a worker's advance would.
 */

/** go-tfe's `iso8601` layout: literal Z, fractional seconds tolerated, no offsets. */
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const isoTimestamp = () => expect.stringMatching(ISO);
const ZERO_COUNTS = { 'resource-additions': 0, 'resource-changes': 0, 'resource-destructions': 0, 'resource-imports': 0 };

function expectStatus(res: Response, status: number): void {
  expect({ status: res.status, body: res.status === status ? 'as expected' : res.text }).toEqual({ status, body: 'as expected' });
  expect(res.headers['content-type']).toContain(JSON_API);
}

describe('plans and applies: golden documents (what go-tfe reads)', () => {
  let h: Harness;
  let f: Fixture;
  let localWorkspaceId: string;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'golden-exec');
    const created = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'pipeline', 'execution-mode': 'local' } },
    });
    expectStatus(created, 201);
    localWorkspaceId = created.body.data.id as string;
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Moves a run to `status` with the `-at` timestamps of `passed` and of `status`, as the worker would. */
  async function moveRun(runId: string, status: string, passed: string[] = []): Promise<void> {
    const keys = [...passed, status].map((key) => `${key.replaceAll('_', '-')}-at`);
    await (
      await nativePool(h.orm.em)
    ).query(
      `update runs set status = $1, status_timestamps = status_timestamps || (select jsonb_object_agg(k, ${DB_NOW_ISO}) from unnest($2::text[]) k),
              version = version + 1 where id = $3`,
      [status, keys, runId],
    );
  }
  const get = async (path: string): Promise<Response> => {
    const res = await api(h, 'get', path, f.organizationToken);
    expectStatus(res, 200);
    return res;
  };
  const putPlan = (runId: string, body: string) =>
    h.http
      .put(`/api/v2/runs/${runId}/plan/json-output`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .set('Content-Type', 'application/json')
      .send(body);

  async function localRun(): Promise<{ runId: string; planId: string; applyId: string }> {
    const runId = await createRun(h, f.organizationToken, localWorkspaceId);
    const run = await get(`/runs/${runId}`);
    return { runId, planId: run.body.data.relationships.plan.data.id, applyId: run.body.data.relationships.apply.data.id };
  }

  const planDocument = (runId: string, planId: string, attributes: Record<string, unknown>) => ({
    data: {
      id: planId,
      type: 'plans',
      attributes: {
        status: 'pending',
        'status-timestamps': {},
        'has-changes': false,
        ...ZERO_COUNTS,
        'execution-details': { mode: 'local' },
        'error-message': null,
        'plan-json-sha256': null,
        'plan-file-sha256': null,
        'log-read-url': null,
        ...attributes,
      },
      relationships: { run: { data: { type: 'runs', id: runId } } },
      links: { self: `/api/v2/plans/${planId}`, 'json-output': `/api/v2/plans/${planId}/json-output` },
    },
  });
  const applyDocument = (runId: string, applyId: string, attributes: Record<string, unknown>) => ({
    data: {
      id: applyId,
      type: 'applies',
      attributes: {
        status: 'pending',
        'status-timestamps': {},
        ...ZERO_COUNTS,
        'execution-details': { mode: 'local' },
        'error-message': null,
        'log-read-url': null,
        ...attributes,
      },
      relationships: { run: { data: { type: 'runs', id: runId } } },
      links: { self: `/api/v2/applies/${applyId}` },
    },
  });

  it("a workspace's execution-mode is in its document, remote by default", async () => {
    expect((await get(`/workspaces/${localWorkspaceId}`)).body.data.attributes['execution-mode']).toBe('local');
    expect((await get(`/workspaces/${f.workspaceId}`)).body.data.attributes['execution-mode']).toBe('remote');
  });

  it('a new run: plan and apply relationships with HCP ids; both pending, with zero counts and no timestamps', async () => {
    const { runId, planId, applyId } = await localRun();
    expect(planId).toMatch(/^plan-[A-Za-z0-9]{16}$/);
    expect(applyId).toMatch(/^apply-[A-Za-z0-9]{16}$/);
    const run = await get(`/runs/${runId}`);
    expect(run.body.data.relationships.plan).toEqual({ data: { type: 'plans', id: planId } });
    expect(run.body.data.relationships.apply).toEqual({ data: { type: 'applies', id: applyId } });
    expect(run.body.data.attributes['has-changes']).toBe(false);
    expect((await get(`/plans/${planId}`)).body).toEqual(planDocument(runId, planId, {}));
    expect((await get(`/runs/${runId}/plan`)).body).toEqual(planDocument(runId, planId, {}));
    expect((await get(`/applies/${applyId}`)).body).toEqual(applyDocument(runId, applyId, {}));
    expect((await get(`/runs/${runId}/apply`)).body).toEqual(applyDocument(runId, applyId, {}));
  });

  it('a reported plan: 200 with the finished plans document, its timestamps and counts; the run shows has-changes', async () => {
    const { runId, planId, applyId } = await localRun();
    await moveRun(runId, 'planning');
    const running = await get(`/plans/${planId}`);
    expect(running.body).toEqual(
      planDocument(runId, planId, {
        status: 'running',
        'status-timestamps': { 'queued-at': isoTimestamp(), 'started-at': isoTimestamp() },
      }),
    );
    const reported = await putPlan(runId, JSON.stringify(CHANGING_PLAN));
    expectStatus(reported, 200);
    const finished = planDocument(runId, planId, {
      status: 'finished',
      'status-timestamps': { 'queued-at': isoTimestamp(), 'started-at': isoTimestamp(), 'finished-at': isoTimestamp() },
      'has-changes': true,
      ...CHANGING_PLAN_COUNTS,
      // Not HCP's: what a pipeline compares its plan file with before it applies.
      'plan-json-sha256': createHash('sha256').update(JSON.stringify(CHANGING_PLAN)).digest('hex'),
    });
    expect(reported.body).toEqual(finished);
    expect((await get(`/plans/${planId}`)).body).toEqual(reported.body);
    const run = await get(`/runs/${runId}?include=plan,apply`);
    expect(run.body.data.attributes).toMatchObject({ status: 'planned', 'has-changes': true });
    expect(run.body.included).toEqual([reported.body.data, applyDocument(runId, applyId, {}).data]);
    // The plan JSON is served back as reported.
    const json = await api(h, 'get', `/plans/${planId}/json-output`, f.organizationToken);
    expect(json.status).toBe(200);
    expect(json.body).toEqual(CHANGING_PLAN);
  });

  it('a finished apply counts what the plan counted; an errored one shows its message', async () => {
    const finished = await localRun();
    await moveRun(finished.runId, 'planning');
    expectStatus(await putPlan(finished.runId, JSON.stringify(CHANGING_PLAN)), 200);
    await moveRun(finished.runId, 'applying', ['confirmed']);
    const applied = await api(h, 'post', `/applies/${finished.applyId}/actions/finish`, f.organizationToken);
    expectStatus(applied, 200);
    expect(applied.body).toEqual(
      applyDocument(finished.runId, finished.applyId, {
        status: 'finished',
        'status-timestamps': { 'queued-at': isoTimestamp(), 'started-at': isoTimestamp(), 'finished-at': isoTimestamp() },
        ...CHANGING_PLAN_COUNTS,
      }),
    );

    const errored = await localRun();
    await moveRun(errored.runId, 'planning');
    expectStatus(await putPlan(errored.runId, JSON.stringify(CHANGING_PLAN)), 200);
    await moveRun(errored.runId, 'applying', ['confirmed']);
    const failed = await api(h, 'post', `/runs/${errored.runId}/apply/actions/error`, f.organizationToken, {
      message: 'Error: quota exceeded',
    });
    expectStatus(failed, 200);
    expect(failed.body).toEqual(
      applyDocument(errored.runId, errored.applyId, {
        status: 'errored',
        'status-timestamps': { 'queued-at': isoTimestamp(), 'started-at': isoTimestamp(), 'errored-at': isoTimestamp() },
        'error-message': 'Error: quota exceeded',
      }),
    );
  });

  it('an errored plan: status errored, its message, no counts; the apply never runs (unreachable)', async () => {
    const { runId, planId, applyId } = await localRun();
    await moveRun(runId, 'planning');
    const res = await api(h, 'post', `/plans/${planId}/actions/error`, f.organizationToken, {
      message: 'Error: Invalid provider configuration',
    });
    expectStatus(res, 200);
    expect(res.body).toEqual(
      planDocument(runId, planId, {
        status: 'errored',
        'status-timestamps': { 'queued-at': isoTimestamp(), 'started-at': isoTimestamp(), 'errored-at': isoTimestamp() },
        'error-message': 'Error: Invalid provider configuration',
      }),
    );
    expect((await get(`/applies/${applyId}`)).body).toEqual(applyDocument(runId, applyId, { status: 'unreachable' }));
  });

  it('a remote run planned and applied by the built-in executor: both finished, mode remote', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId, { 'plan-json': CHANGING_PLAN });
    await moveRun(runId, 'applied', ['planning', 'planned', 'confirmed', 'applying']);
    const run = await get(`/runs/${runId}?include=plan,apply`);
    const [plan, apply] = run.body.included;
    expect(plan).toEqual({
      ...planDocument(runId, run.body.data.relationships.plan.data.id, {}).data,
      attributes: expect.objectContaining({
        status: 'finished',
        'has-changes': true,
        'execution-details': { mode: 'remote' },
        ...CHANGING_PLAN_COUNTS,
      }),
    });
    expect(apply.attributes).toEqual(
      expect.objectContaining({ status: 'finished', 'execution-details': { mode: 'remote' }, ...CHANGING_PLAN_COUNTS }),
    );
  });

  it('refusals in the one error model: 409 transition not allowed, 422 with a pointer, 404', async () => {
    const { runId, planId } = await localRun();
    const early = await putPlan(runId, JSON.stringify(CHANGING_PLAN));
    expect(early.status).toBe(409);
    expect(early.body).toEqual({
      errors: [
        {
          status: '409',
          title: 'transition not allowed',
          detail: 'A run that is pending takes no plan report: only a run that is planning does.',
        },
      ],
    });
    await moveRun(runId, 'planning');
    const invalid = await putPlan(runId, JSON.stringify({ format_version: '1.2', resource_changes: 'none' }));
    expect(invalid.body).toEqual({
      errors: [
        {
          status: '422',
          title: 'invalid plan',
          detail: '/resource_changes must be an array of resource changes.',
          source: { pointer: '/resource_changes' },
        },
      ],
    });
    expectError(await api(h, 'post', `/plans/${planId}/actions/error`, f.organizationToken, { message: '' }), 422, '/message');
    expectError(await api(h, 'get', '/plans/plan-doesnotexist0000', f.organizationToken), 404);
    expectError(await api(h, 'get', '/applies/apply-doesnotexist000', f.organizationToken), 404);
  });
});
