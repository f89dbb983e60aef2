import { beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { TaskResultOutcome } from '@runtasks/shared/db';
import { expectError, expectNotFound, NOT_FOUND, type Response, uniqueName } from '../../../test/support/assertions.ts';
import { api, createTeam, createTeamToken, grantWorkspace, JSON_API } from '../../../test/support/fixtures.ts';
import { expectPagination, expectStatus, expectTaskResult, expectTaskStage, ID, isoTimestamp } from './run-tasks-golden/documents.ts';
import { useRunTasksGolden } from './run-tasks-golden/setup.ts';

/**
 * Golden tests: every run task endpoint, request and response, checked field by field against
 * what go-tfe, the provider and the Terraform CLI decode (docs/api.md, "Compatibility").
 * Documents are compared whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails.
 */
describe('run tasks API golden documents', () => {
  const g = useRunTasksGolden();
  const { runWithTask } = g;

  describe('task results and outcomes', () => {
    let run: Awaited<ReturnType<typeof runWithTask>>;
    let resultId: string;
    let outcomeIds: string[];
    const tags = { Severity: [{ label: 'High', level: 'error' }], Status: [{ label: 'Failed', level: 'error' }] };

    beforeAll(async () => {
      run = await runWithTask(['pre_apply'], 'advisory');
      const stage = await api(g.h, 'get', `/task-stages/${run.stageIds[0]}`, run.fixture.organizationToken);
      resultId = stage.body.data.relationships['task-results'].data[0].id as string;
      const em = g.h.orm.em.fork();
      const outcomes = [
        em.create(TaskResultOutcome, {
          id: newId('taskResultOutcome'),
          taskResult: resultId,
          outcomeId: 'PRTNR-CC-TF-127',
          description: 'ST-2942:S3 Bucket will not enforce MFA login on delete requests',
          body: '# Resolution for issue ST-2942\n\nEnable MFA delete.',
          url: 'https://external.service.dev/result/PRTNR-CC-TF-127',
          tags,
        }),
        em.create(TaskResultOutcome, {
          id: newId('taskResultOutcome'),
          taskResult: resultId,
          outcomeId: 'PRTNR-CC-TF-128',
          description: null,
          body: null,
          url: null,
          tags: {},
        }),
      ];
      await em.flush();
      outcomeIds = outcomes.map((outcome) => outcome.id);
    });

    it('show → 200 with every attribute go-tfe decodes and both task-stage relationships', async () => {
      const res = await api(g.h, 'get', `/task-results/${resultId}`, run.fixture.organizationToken);
      expectStatus(res, 200);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTaskResult(res.body.data, {
        stageId: run.stageIds[0] ?? '',
        taskId: run.taskId,
        taskName: run.taskName,
        taskUrl: g.taskServer.url,
        stage: 'pre_apply',
        workspaceTaskId: run.workspaceTaskId,
        enforcement: 'advisory',
      });
      expect(res.body.data.id).toBe(resultId);
    });

    it('show with an include → 400 naming it (HCP documents none for a task result), like every other read', async () => {
      for (const include of ['task-stage', 'outcomes', 'nope']) {
        const res = await api(g.h, 'get', `/task-results/${resultId}?include=${include}`, run.fixture.organizationToken);
        expect(expectError(res, 400)).toEqual({
          status: '400',
          title: 'bad request',
          detail: 'Invalid include parameter',
          source: { parameter: 'include' },
          meta: { reason: `'${include}' is not a valid include here; allowed: none.`, value: include, allowed: [] },
        });
      }
      expectStatus(await api(g.h, 'get', `/task-results/${resultId}?include=`, run.fixture.organizationToken), 200);
    });

    it('outcomes list → 200 task-result-outcomes documents with meta.pagination', async () => {
      const res = await api(g.h, 'get', `/task-results/${resultId}/outcomes`, run.fixture.organizationToken);
      expectStatus(res, 200);
      expectPagination(res, 2);
      const byId = new Map((res.body.data as { id: string }[]).map((outcome) => [outcome.id, outcome]));
      expect([...byId.keys()].sort()).toEqual([...outcomeIds].sort());
      const first = outcomeIds[0] ?? '';
      const second = outcomeIds[1] ?? '';
      expect(byId.get(first)).toEqual({
        id: first,
        type: 'task-result-outcomes',
        attributes: {
          'outcome-id': 'PRTNR-CC-TF-127',
          description: 'ST-2942:S3 Bucket will not enforce MFA login on delete requests',
          body: '# Resolution for issue ST-2942\n\nEnable MFA delete.',
          url: 'https://external.service.dev/result/PRTNR-CC-TF-127',
          tags,
          'created-at': isoTimestamp(),
        },
        relationships: { 'task-result': { data: { id: resultId, type: 'task-results' } } },
        links: { self: `/api/v2/task-result-outcomes/${first}` },
      });
      expect(byId.get(second)).toEqual({
        id: second,
        type: 'task-result-outcomes',
        attributes: { 'outcome-id': 'PRTNR-CC-TF-128', description: null, body: null, url: null, tags: {}, 'created-at': isoTimestamp() },
        relationships: { 'task-result': { data: { id: resultId, type: 'task-results' } } },
        links: { self: `/api/v2/task-result-outcomes/${second}` },
      });

      const paged = await api(
        g.h,
        'get',
        `/task-results/${resultId}/outcomes?page%5Bsize%5D=1&page%5Bnumber%5D=2`,
        run.fixture.organizationToken,
      );
      expectStatus(paged, 200);
      expectPagination(paged, 2, 2, 1);
      expect(paged.body.data).toHaveLength(1);
    });

    it('outcome show → 200 with the same document as in the list', async () => {
      const list = await api(g.h, 'get', `/task-results/${resultId}/outcomes`, run.fixture.organizationToken);
      for (const id of outcomeIds) {
        const res = await api(g.h, 'get', `/task-result-outcomes/${id}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expect(Object.keys(res.body)).toEqual(['data']);
        expect(res.body.data.id).toMatch(ID.outcome);
        expect(res.body.data).toEqual((list.body.data as { id: string }[]).find((outcome) => outcome.id === id));
      }
    });

    it('a result without outcomes lists none', async () => {
      const other = await runWithTask(['post_plan']);
      const stage = await api(g.h, 'get', `/task-stages/${other.stageIds[0]}`, other.fixture.organizationToken);
      const otherResult = stage.body.data.relationships['task-results'].data[0].id as string;
      const res = await api(g.h, 'get', `/task-results/${otherResult}/outcomes`, other.fixture.organizationToken);
      expectStatus(res, 200);
      expect(res.body.data).toEqual([]);
      expectPagination(res, 0);
    });
  });

  describe('override', () => {
    /** Puts a stage in awaiting_override as the worker would, with its timestamp. */
    async function awaitOverride(stageId: string): Promise<string> {
      const at = new Date().toISOString();
      await g.h.orm.em
        .fork()
        .execute(
          `update task_stages set status = 'awaiting_override', status_timestamps = status_timestamps || ?::jsonb, updated_at = now() where id = ?`,
          [JSON.stringify({ 'awaiting-override-at': at }), stageId],
        );
      return at;
    }

    const override = (stageId: string, token: string, body: string) =>
      g.h.http
        .post(`/api/v2/task-stages/${stageId}/actions/override`)
        .set('Authorization', `Bearer ${token}`)
        .set('Content-Type', JSON_API)
        .send(body);

    function expectTransitionNotAllowed(res: Response): void {
      expect(expectError(res, 409).title).toBe('transition not allowed');
    }

    it('on a pending stage → 409 "transition not allowed", the stage unchanged', async () => {
      const { fixture, stageIds, runId } = await runWithTask(['post_plan']);
      const stageId = stageIds[0] ?? '';
      expectTransitionNotAllowed(await override(stageId, fixture.organizationToken, '{}'));
      const shown = await api(g.h, 'get', `/task-stages/${stageId}`, fixture.organizationToken);
      expect(shown.body.data.attributes.status).toBe('pending');
      expect(shown.body.data.attributes['status-timestamps']).toEqual({});
      expect(shown.body.data.relationships.run.data).toEqual({ id: runId, type: 'runs' });
    });

    it.each([
      ['{}', '{}'],
      ['{"comment":"ok"}', '{"comment":"ok"}'],
    ])('awaiting_override + override with body %s → 200, running, both timestamps; a second override → 409', async (_label, body) => {
      const { fixture, stageIds, runId } = await runWithTask(['post_plan']);
      const stageId = stageIds[0] ?? '';
      const awaitingAt = await awaitOverride(stageId);
      const stage = await api(g.h, 'get', `/task-stages/${stageId}`, fixture.organizationToken);
      const resultIds = (stage.body.data.relationships['task-results'].data as { id: string }[]).map((result) => result.id);
      expectTaskStage(stage.body.data, {
        runId,
        stage: 'post_plan',
        status: 'awaiting_override',
        resultIds,
        statusTimestamps: { 'awaiting-override-at': awaitingAt },
      });
      expect(stage.body.data.attributes.actions['is-overridable']).toBe(true);

      const res = await override(stageId, fixture.organizationToken, body);
      expectStatus(res, 200);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTaskStage(res.body.data, {
        runId,
        stage: 'post_plan',
        status: 'running',
        resultIds,
        statusTimestamps: { 'awaiting-override-at': awaitingAt, 'running-at': isoTimestamp() },
      });
      expect(res.body.data.id).toBe(stageId);
      const runningAt = res.body.data.attributes['status-timestamps']['running-at'] as string;
      expect(Date.parse(runningAt)).toBeGreaterThanOrEqual(Date.parse(awaitingAt) - 1000);

      expectTransitionNotAllowed(await override(stageId, fixture.organizationToken, body));
      const shown = await api(g.h, 'get', `/task-stages/${stageId}`, fixture.organizationToken);
      expect(shown.body.data.attributes['status-timestamps']).toEqual({ 'awaiting-override-at': awaitingAt, 'running-at': runningAt });
    });

    it("an override keeps the stage's running-at of when it first ran (timestamps are set once)", async () => {
      const { fixture, stageIds } = await runWithTask(['post_plan']);
      const stageId = stageIds[0] ?? '';
      const firstRanAt = '2026-01-02T03:04:05.000Z';
      await g.h.orm.em
        .fork()
        .execute(`update task_stages set status_timestamps = status_timestamps || ?::jsonb where id = ?`, [
          JSON.stringify({ 'running-at': firstRanAt }),
          stageId,
        ]);
      const awaitingAt = await awaitOverride(stageId);
      const res = await override(stageId, fixture.organizationToken, '{}');
      expectStatus(res, 200);
      expect(res.body.data.attributes['status-timestamps']).toEqual({ 'running-at': firstRanAt, 'awaiting-override-at': awaitingAt });
    });

    it('a reader without manage-policy-overrides → 403 naming it; a team with it → 200, workspace access or not', async () => {
      const { fixture, stageIds } = await runWithTask(['post_plan']);
      const stageId = stageIds[0] ?? '';
      await awaitOverride(stageId);

      const readers = await createTeam(g.h, fixture.organization, fixture.organizationToken, uniqueName('readers'));
      await grantWorkspace(g.h, fixture.organizationToken, readers, fixture.workspaceId, { access: 'read' });
      const readersToken = await createTeamToken(g.h, fixture.organizationToken, readers);
      const strangers = await createTeam(g.h, fixture.organization, fixture.organizationToken, uniqueName('strangers'));
      const strangersToken = await createTeamToken(g.h, fixture.organizationToken, strangers);
      // HCP: the permission implies reading runs on every workspace, which overriding needs.
      const overriders = await createTeam(g.h, fixture.organization, fixture.organizationToken, uniqueName('no-ws'), {
        'manage-policy-overrides': true,
      });
      const overridersToken = await createTeamToken(g.h, fixture.organizationToken, overriders);

      // The reader sees the stage, says it cannot override, and is told what overriding takes.
      const seen = await api(g.h, 'get', `/task-stages/${stageId}`, readersToken);
      expectStatus(seen, 200);
      expect(seen.body.data.attributes.permissions).toEqual({
        'can-override-policy': false,
        'can-override-tasks': false,
        'can-override': false,
      });
      expect(seen.body.data.attributes.actions).toEqual({ 'is-overridable': false });
      expect(expectError(await override(stageId, readersToken, '{}'), 403).detail).toBe(
        'This token may read the task stage but may not override it: that takes the organization\'s "manage policy overrides" permission.',
      );
      // A team that cannot read the stage learns nothing of it.
      const denied = await override(stageId, strangersToken, '{}');
      expectNotFound(denied);
      expect(denied.body).toEqual(NOT_FOUND);
      expect((await api(g.h, 'get', `/task-stages/${stageId}`, fixture.organizationToken)).body.data.attributes.status).toBe(
        'awaiting_override',
      );

      expectStatus(await api(g.h, 'get', `/task-stages/${stageId}`, overridersToken), 200);
      const res = await override(stageId, overridersToken, '{"comment":"ok"}');
      expectStatus(res, 200);
      expect(res.body.data.attributes.status).toBe('running');
      expect(res.body.data.attributes.permissions).toEqual({
        'can-override-policy': false,
        'can-override-tasks': true,
        'can-override': true,
      });
    });
  });
});
