import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { expectError } from '../../../test/support/assertions.ts';
import { api, createRun, eventually } from '../../../test/support/fixtures.ts';
import { CHANGING_PLAN, NO_CHANGE_PLAN } from '../../../test/support/plan-documents.ts';
import { PLAN_JSON_MAX_BYTES } from './local-execution/limits.ts';
import { useLocalExecution } from './local-execution/setup.ts';

/**
 * The plan that was checked is the plan that is applied: a pipeline's reports are taken once, a retry of
 * the very same report is answered again, and anything else (another plan, another plan file, a failure
 * after a success) is refused naming both. Errored plans end the run; Terraform's `applyable` decides
 * whether there is anything to apply. The API and a worker on real PostgreSQL and Redis, a real task
 * server that reads each stage's plan.
 */
describe('local execution: reports a pipeline repeats, and plans Terraform judged', () => {
  const g = useLocalExecution();
  const { run, waitFor, stored, putPlan, readsOf } = g;
  const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');
  const FILE = 'ab'.repeat(32);
  const OTHER_FILE = 'cd'.repeat(32);
  const HEADER = 'X-Runtasks-Plan-File-SHA256';
  const planned = async (attributes: Record<string, unknown> = {}) => {
    const runId = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId, attributes);
    await waitFor(runId, 'planning');
    return runId;
  };
  /** What a report must leave alone when it is answered again or refused (a worker may move the run meanwhile). */
  const reported = async (runId: string) => {
    const row = await stored(runId);
    return { ...row, status: undefined, version: undefined };
  };

  it('takes a plan once: the same plan again is answered again; another plan, plan file or outcome is refused naming both', async () => {
    const runId = await planned();
    const path = `/runs/${runId}/plan/json-output`;
    const body = JSON.stringify(CHANGING_PLAN);
    const first = await putPlan(path, body, undefined, undefined, { [HEADER]: FILE.toUpperCase() });
    expect(first.status).toBe(200);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(first.body.data.attributes).toMatchObject({ status: 'finished', 'plan-json-sha256': sha256(body), 'plan-file-sha256': FILE });
    await waitFor(runId, 'post_plan_completed');
    const taken = await reported(runId);

    const again = await putPlan(path, body, undefined, undefined, { [HEADER]: FILE });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);

    const other = JSON.stringify(NO_CHANGE_PLAN);
    const conflict = expectError(await putPlan(path, other, undefined, undefined, { [HEADER]: FILE }), 409);
    expect(conflict.title).toBe('conflicting report');
    expect(conflict.detail).toContain(`plan JSON sha256 ${sha256(body)}`);
    expect(conflict.detail).toContain(`plan JSON sha256 ${sha256(other)}`);
    expect(conflict.meta).toEqual({
      taken: { outcome: 'finished', 'plan-json-sha256': sha256(body), 'plan-file-sha256': FILE },
      refused: { 'plan-json-sha256': sha256(other), 'plan-file-sha256': FILE },
    });
    const otherFile = expectError(await putPlan(path, body, undefined, undefined, { [HEADER]: OTHER_FILE }), 409);
    expect(otherFile.detail).toContain(`plan file sha256 ${OTHER_FILE}`);
    const failure = expectError(
      await api(g.h, 'post', `/runs/${runId}/plan/actions/error`, g.f.organizationToken, { message: 'boom' }),
      409,
    );
    expect(failure.meta).toEqual({
      taken: { outcome: 'finished', 'plan-json-sha256': sha256(body), 'plan-file-sha256': FILE },
      refused: { outcome: 'errored', message: 'boom' },
    });
    // A header that is no SHA-256 is refused before anything is read.
    const header = expectError(await putPlan(path, body, undefined, undefined, { [HEADER]: 'not-a-hash' }), 400);
    expect(header).toMatchObject({ source: { header: HEADER } });
    expect(await reported(runId)).toEqual(taken);
    const shown = await api(g.h, 'get', `/runs/${runId}/plan`, g.f.organizationToken);
    expect(shown.body.data.attributes).toMatchObject({ 'plan-json-sha256': sha256(body), 'plan-file-sha256': FILE });
  });

  it('refuses an apply of another plan file than the one checked; a repeated finish is answered again, a failure after it refused', async () => {
    const runId = await planned({ 'auto-apply': true });
    expect(
      (await putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(CHANGING_PLAN), undefined, undefined, { [HEADER]: FILE })).status,
    ).toBe(200);
    await waitFor(runId, 'applying');
    const finish = (file?: string) =>
      g.h.http
        .post(`/api/v2/runs/${runId}/apply/actions/finish`)
        .set('Authorization', `Bearer ${g.f.organizationToken}`)
        .set(file ? { [HEADER]: file } : {});
    const wrong = expectError(await finish(OTHER_FILE), 409);
    expect(wrong.title).toBe('conflicting report');
    expect(wrong.detail).toContain(
      `The plan file applied (sha256 ${OTHER_FILE}) is not the plan file checked with this run's plan (sha256 ${FILE})`,
    );
    expect((await run(runId)).data.attributes.status).toBe('applying');

    const applied = await finish(FILE);
    expect(applied.status).toBe(200);
    expect(applied.body.data.attributes.status).toBe('finished');
    await waitFor(runId, 'post_apply_completed');
    const again = await finish();
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(again.body.data).toEqual(applied.body.data);
    const failure = expectError(
      await api(g.h, 'post', `/runs/${runId}/apply/actions/error`, g.f.organizationToken, { message: 'apply failed: quota' }),
      409,
    );
    expect(failure.meta).toEqual({ taken: { outcome: 'finished' }, refused: { outcome: 'errored', message: 'apply failed: quota' } });
    expect((await run(runId)).data.attributes.status).toBe('post_apply_completed');
  });

  it('answers a repeated apply error again, and refuses another message or a finish after it', async () => {
    const runId = await planned({ 'auto-apply': true });
    expect((await putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(CHANGING_PLAN))).status).toBe(200);
    await waitFor(runId, 'applying');
    const error = (message: string) => api(g.h, 'post', `/runs/${runId}/apply/actions/error`, g.f.organizationToken, { message });
    const first = await error('apply failed: quota');
    expect(first.body.data.attributes).toMatchObject({ status: 'errored', 'error-message': 'apply failed: quota' });
    await waitFor(runId, 'errored');
    const again = await error('apply failed: quota');
    expect([again.status, again.headers['idempotent-replayed'], again.body.data]).toEqual([200, 'true', first.body.data]);
    expect(expectError(await error('something else'), 409).meta).toMatchObject({
      taken: { outcome: 'errored', message: 'apply failed: quota' },
      refused: { outcome: 'errored', message: 'something else' },
    });
    expect(expectError(await api(g.h, 'post', `/runs/${runId}/apply/actions/finish`, g.f.organizationToken), 409).title).toBe(
      'conflicting report',
    );
  });

  it('of identical reports racing for one run, one is taken and the other answered as its repeat', async () => {
    const runId = await planned();
    const body = JSON.stringify(CHANGING_PLAN);
    const answers = await Promise.all([1, 2, 3].map(() => putPlan(`/runs/${runId}/plan/json-output`, body)));
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === 'true')).toHaveLength(2);
    expect((await stored(runId))?.['plan_json_sha256']).toBe(sha256(body));
  });

  it('ends the run errored on a plan Terraform marked errored: no post-plan task runs, and the workspace is free', async () => {
    const runId = await planned();
    const next = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    expect((await run(next)).data.attributes['waiting-for']).toMatchObject({ position: 1, run: { id: runId, status: 'planning' } });
    const errored = JSON.stringify({ ...CHANGING_PLAN, errored: true, applyable: false, complete: false });
    const answer = await putPlan(`/runs/${runId}/plan/json-output`, errored);
    expect(answer.status).toBe(200);
    expect(answer.body.data.attributes).toMatchObject({
      status: 'errored',
      'has-changes': false,
      'plan-json-sha256': sha256(errored),
      'error-message': expect.stringContaining('Terraform marked this plan as errored ("errored": true)'),
    });
    await waitFor(runId, 'errored');
    // The next run has the workspace at once, not at the sweeper's pass.
    await waitFor(next, 'planning');
    expect((await run(next)).data.attributes['waiting-for']).toBeNull();
    await eventually(async () => {
      const stages = await api(g.h, 'get', `/runs/${runId}/task-stages`, g.f.organizationToken);
      const post = stages.body.data.find((stage: { attributes: { stage: string } }) => stage.attributes.stage === 'post_plan');
      return post.attributes.status === 'canceled' ? true : undefined;
    });
    expect(readsOf(runId, 'post_plan')).toEqual([]);
    expectError(await api(g.h, 'post', `/runs/${runId}/actions/apply`, g.f.organizationToken, {}), 409);
    // The same errored plan again is its repeat; reporting a plan error after it is another outcome.
    expect((await putPlan(`/runs/${runId}/plan/json-output`, errored)).headers['idempotent-replayed']).toBe('true');
    expectError(await api(g.h, 'post', `/runs/${runId}/plan/actions/error`, g.f.organizationToken, { message: 'plan failed' }), 409);
  });

  it('applies a plan Terraform calls applyable although no resource changes (a move), instead of finishing it', async () => {
    const runId = await planned();
    const moveOnly = {
      format_version: '1.2',
      terraform_version: '1.9.5',
      applyable: true,
      complete: true,
      errored: false,
      planned_values: { root_module: {} },
      resource_changes: [
        {
          address: 'aws_s3_bucket.logs',
          previous_address: 'aws_s3_bucket.log',
          mode: 'managed',
          type: 'aws_s3_bucket',
          name: 'logs',
          change: { actions: ['no-op'], before: {}, after: {} },
        },
      ],
      configuration: { root_module: {} },
    };
    const answer = await putPlan(`/runs/${runId}/plan/json-output`, JSON.stringify(moveOnly));
    expect(answer.body.data.attributes).toMatchObject({
      status: 'finished',
      'has-changes': true,
      'resource-additions': 0,
      'resource-changes': 0,
      'resource-destructions': 0,
      'resource-imports': 0,
    });
    await waitFor(runId, 'post_plan_completed');
    const waiting = await run(runId);
    expect(waiting.data.attributes['has-changes']).toBe(true);
    expect(waiting.data.attributes.actions['is-confirmable']).toBe(true);
    expect((await api(g.h, 'post', `/runs/${runId}/actions/apply`, g.f.organizationToken, {})).status).toBe(202);
    await waitFor(runId, 'applying');
    expect((await api(g.h, 'post', `/runs/${runId}/apply/actions/finish`, g.f.organizationToken)).status).toBe(200);
    await waitFor(runId, 'post_apply_completed');
  });

  it('states the size limit and its setting in the 413, changing nothing', async () => {
    const runId = await planned();
    const before = await stored(runId);
    const oversized = JSON.stringify({ ...CHANGING_PLAN, padding: 'x'.repeat(PLAN_JSON_MAX_BYTES) });
    const refused = expectError(await putPlan(`/runs/${runId}/plan/json-output`, oversized), 413);
    expect(refused.detail).toBe(
      `The plan JSON is larger than this service takes: at most ${PLAN_JSON_MAX_BYTES} bytes, set by PLAN_JSON_MAX_BYTES.`,
    );
    expect(refused.meta).toEqual({ 'limit-bytes': PLAN_JSON_MAX_BYTES });
    expect(await stored(runId)).toEqual(before);
  });

  it('frees the workspace when a run waiting for its pipeline is canceled; a queued run can be discarded and leaves the queue', async () => {
    const abandoned = await planned();
    const next = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    const last = await createRun(g.h, g.f.organizationToken, g.localWorkspaceId);
    const waiting = (await run(last)).data.attributes['waiting-for'];
    expect(waiting).toMatchObject({
      position: 2,
      run: {
        id: abandoned,
        status: 'planning',
        'created-by': expect.stringMatching(/^user-api-org-/),
        message: 'Queued manually via the API',
      },
      lock: null,
    });
    // It holds the workspace since it started (it was created in its pre_plan stage).
    expect(waiting.run.since).toBe((await run(abandoned)).data.attributes['status-timestamps']['pre-plan-running-at']);

    expect((await api(g.h, 'post', `/runs/${last}/actions/discard`, g.f.organizationToken)).status).toBe(202);
    expect((await run(last)).data.attributes).toMatchObject({ status: 'discarded', 'waiting-for': null });
    expect((await run(next)).data.attributes['waiting-for']).toMatchObject({ position: 1 });

    expect((await api(g.h, 'post', `/runs/${abandoned}/actions/cancel`, g.f.organizationToken)).status).toBe(202);
    await waitFor(next, 'planning');
    const late = expectError(await putPlan(`/runs/${abandoned}/plan/json-output`, JSON.stringify(CHANGING_PLAN)), 409);
    expect([late.title, late.detail]).toEqual([
      'transition not allowed',
      'The run was canceled while it waited for its plan; it takes no report. Start a new run.',
    ]);
  });
});
