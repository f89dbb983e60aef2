import { describe, expect, it } from '@jest/globals';
import { expectError, UNAUTHORIZED } from '../../../test/support/assertions.ts';
import { api, createRun } from '../../../test/support/fixtures.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';
import { RFC3339, type StageView, type TaskSetup } from './orchestration/views.ts';
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
    runRequests,
    payloadOf,
    workspaceWith,
    getRun,
    stagesOf,
    getResult,
    runReaches,
    answeredRequest,
    callback,
    verdict,
    getWithToken,
  } = g;

  describe('the run task request', () => {
    it('carries every payload v1 field, signed over the exact bytes (checked with openssl)', async () => {
      const hmacKey = 'e2e-hmac-key-0123456789';
      const planJson = { format_version: '1.2', terraform_version: '1.9.0', resource_changes: [], planned_values: { root_module: {} } };
      const { workspaceId, tasks } = await workspaceWith(g.org, [
        { hmacKey, stages: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'], enforcement: 'advisory' },
      ]);
      const workspace = (await api(g.h, 'get', `/workspaces/${workspaceId}`, g.org.organizationToken)).body.data;
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, {
        'auto-apply': true,
        message: 'payload check',
        'plan-json': planJson,
      });
      const run = await runReaches(g.org, runId, 'post_apply_completed');
      const { stages } = await stagesOf(g.org, runId);
      const server = (tasks[0] as TaskSetup).server;
      const requests = runRequests(server);
      expect(requests.map((request) => payloadOf(request).stage)).toEqual(['pre_plan', 'post_plan', 'pre_apply', 'post_apply']);
      const base = g.h.config.publicBaseUrl;
      for (const request of requests) {
        const payload = payloadOf(request);
        const stage = stages.find((candidate) => candidate.stage === payload.stage) as StageView;
        expect(request.method).toBe('POST');
        expect(request.path).toBe('/run-task');
        expect(request.headers['content-type']).toBe('application/json');
        expect(request.headers['user-agent']).toMatch(/runtasks/i);
        // Signature: lowercase hex HMAC-SHA512 of the raw bytes, computed independently.
        expect(request.headers['x-tfc-task-signature']).toBe(opensslHmac(hmacKey, Buffer.from(request.body, 'utf8')));
        expect(request.signatureVerified).toBe(true);
        // Compact JSON: the bytes are exactly JSON.stringify of what they parse to.
        expect(request.body).toBe(JSON.stringify(JSON.parse(request.body)));

        expect(payload).toEqual(
          expect.objectContaining({
            payload_version: 1,
            stage: stage.stage,
            access_token: expect.any(String),
            capabilities: { outcomes: true },
            is_speculative: false,
            organization_name: g.org.organization,
            run_created_at: expect.stringMatching(RFC3339),
            run_created_by: expect.any(String),
            run_id: runId,
            run_message: 'payload check',
            task_result_callback_url: `${base}/api/v2/task-results/${stage.resultIds[0]}/callback`,
            task_result_enforcement_level: 'advisory',
            task_result_id: stage.resultIds[0],
            vcs_branch: null,
            vcs_commit_url: null,
            vcs_commit_hash: null,
            vcs_pull_request_url: null,
            vcs_repo_url: null,
            workspace_id: workspaceId,
            workspace_name: workspace.attributes.name,
            workspace_working_directory: expect.any(String),
          }),
        );
        for (const field of ['configuration_version_download_url', 'configuration_version_id', 'run_app_url', 'workspace_app_url']) {
          expect(payload).toHaveProperty(field);
        }
        // No configuration version was given: both are null, consistently.
        expect([payload['configuration_version_id'], payload['configuration_version_download_url']]).toEqual([null, null]);
        expect(payload.access_token).not.toBe('test-token');
        expect((payload.access_token as string).length).toBeGreaterThanOrEqual(20);
        expect(Date.parse(payload['run_created_at'] as string)).toBe(Date.parse(run.createdAt));
        expect(payload['run_created_by']).not.toBe('');
        const workspaceAppUrl = payload['workspace_app_url'] as string;
        expect(workspaceAppUrl.startsWith(`${base}/app/${g.org.organization}/`)).toBe(true);
        expect(workspaceAppUrl.endsWith(`/${workspace.attributes.name}`)).toBe(true);
        expect(payload['run_app_url']).toBe(`${workspaceAppUrl}/runs/${runId}`);
        if (stage.stage === 'pre_plan') {
          expect(Object.keys(payload)).not.toContain('plan_json_api_url');
          expect(request.plan).toBeUndefined();
        } else {
          expect(payload.plan_json_api_url).toBe(`${base}/api/v2/plans/${run.planId}/json-output`);
          // The task server read the plan with its access token.
          expect(request.plan?.status).toBe(200);
        }
        expect(request.callbacks.map((call) => call.status)).toEqual([200]);
      }
      // One token per result.
      expect(new Set(requests.map((request) => payloadOf(request).access_token)).size).toBe(4);
    });
  });

  describe('the access token and the callback API', () => {
    it('reads its own run plan only, nothing else, and dies when the result is final', async () => {
      const planJson = { format_version: '1.2', terraform_version: '1.9.1', resource_changes: [{ address: 'null_resource.x' }] };
      const mine = await workspaceWith(g.org, [{ mode: 'no-callback' }]);
      const other = await workspaceWith(g.org, [{}]);
      const runId = await createRun(g.h, g.org.organizationToken, mine.workspaceId, { 'auto-apply': false, 'plan-json': planJson });
      const otherRunId = await createRun(g.h, g.org.organizationToken, other.workspaceId, { 'auto-apply': false });
      const otherRun = await getRun(g.org, otherRunId);
      const request = await answeredRequest((mine.tasks[0] as TaskSetup).server);
      const payload = payloadOf(request);
      const token = payload.access_token;
      // Progress first, so the checks below run well inside the (short) progress window.
      expect((await callback(payload.task_result_id, token, verdict('running'))).status).toBe(200);

      const own = await getWithToken(payload.plan_json_api_url as string, token);
      expect(own).toEqual({ status: 200, body: planJson });
      expect((await getWithToken(`${g.h.config.publicBaseUrl}/api/v2/runs/${runId}/plan/json-output`, token)).status).toBe(200);
      // Another run's plan: not found, by either path.
      const foreign = await getWithToken(`${g.h.config.publicBaseUrl}/api/v2/plans/${otherRun.planId}/json-output`, token);
      expect(foreign.status).toBe(404);
      expect((await getWithToken(`${g.h.config.publicBaseUrl}/api/v2/runs/${otherRunId}/plan/json-output`, token)).status).toBe(404);
      // Any other endpoint: unauthorized.
      for (const path of [
        `/runs/${runId}`,
        `/task-results/${payload.task_result_id}`,
        `/workspaces/${mine.workspaceId}`,
        '/organizations',
      ]) {
        const res = await api(g.h, 'get', path, token);
        expect([path, res.status, res.body]).toEqual([path, 401, UNAUTHORIZED]);
      }

      expect((await callback(payload.task_result_id, token, verdict('passed'))).status).toBe(200);
      const dead = await getWithToken(payload.plan_json_api_url as string, token);
      expect(dead).toEqual({ status: 401, body: UNAUTHORIZED });
      await runReaches(g.org, runId, 'post_plan_completed');
    });

    it('answers 401 to a wrong or foreign token, 422 to a bad status, and stores outcomes in all three shapes', async () => {
      const { workspaceId, tasks } = await workspaceWith(g.org, [{ mode: 'no-callback' }, { mode: 'no-callback' }]);
      const runId = await createRun(g.h, g.org.organizationToken, workspaceId, { 'auto-apply': false });
      const first = payloadOf(await answeredRequest((tasks[0] as TaskSetup).server));
      const second = payloadOf(await answeredRequest((tasks[1] as TaskSetup).server));
      const resultId = first.task_result_id;
      expect((await callback(resultId, first.access_token, verdict('running'))).status).toBe(200);

      const wrong = await callback(resultId, `rtcb_${'x'.repeat(43)}`, verdict('passed'));
      expect([wrong.status, wrong.body]).toEqual([401, UNAUTHORIZED]);
      const foreign = await callback(resultId, second.access_token, verdict('passed'));
      expect([foreign.status, foreign.body]).toEqual([401, UNAUTHORIZED]);
      const missing = await callback(resultId, undefined, verdict('passed'));
      expect([missing.status, missing.body]).toEqual([401, UNAUTHORIZED]);
      for (const status of ['errored', 'canceled', 'pending']) {
        expectError(await callback(resultId, first.access_token, verdict(status)), 422, '/data/attributes/status');
      }
      expect((await getResult(g.org, resultId)).status).toBe('running');

      const outcome = (id: string) => ({
        'outcome-id': id,
        description: `finding ${id}`,
        body: `## ${id}`,
        url: `https://tasks.example.test/${id}`,
        tags: { Severity: [{ label: 'High', level: 'error' }] },
      });
      const shapes = [
        verdict('running', {}),
        verdict('running', {}),
        { data: { type: 'task-results', attributes: { status: 'passed', message: 'all good', outcomes: [outcome('OUT-3')] } } },
      ];
      (shapes[0] as { data: Record<string, unknown> }).data['relationships'] = {
        outcomes: { data: [{ type: 'task-result-outcomes', attributes: outcome('OUT-1') }] },
      };
      (shapes[1] as { data: Record<string, unknown> }).data['relationships'] = {
        'task-result-outcomes': { data: [{ type: 'task-result-outcomes', attributes: outcome('OUT-2') }] },
      };
      for (const body of shapes) {
        const res = await callback(resultId, first.access_token, body);
        expect([res.status, res.body.data?.id]).toEqual([200, resultId]);
      }
      const listed = await api(g.h, 'get', `/task-results/${resultId}/outcomes`, g.org.organizationToken);
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((item: { attributes: Record<string, unknown> }) => item.attributes['outcome-id'])).toEqual([
        'OUT-1',
        'OUT-2',
        'OUT-3',
      ]);
      expect(listed.body.data[2].attributes).toEqual(
        expect.objectContaining({
          description: 'finding OUT-3',
          body: '## OUT-3',
          tags: { Severity: [{ label: 'High', level: 'error' }] },
        }),
      );
      const result = await getResult(g.org, resultId);
      expect([result.status, result.message, result.outcomesCount]).toEqual(['passed', 'all good', 3]);

      expect((await callback(second.task_result_id, second.access_token, verdict('passed'))).status).toBe(200);
      await runReaches(g.org, runId, 'post_plan_completed');
    });
  });
});
