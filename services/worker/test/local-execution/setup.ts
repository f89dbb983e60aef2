import { afterAll, beforeAll, beforeEach, expect } from '@jest/globals';
import { uniqueName } from '../../../../test/support/assertions.ts';
import {
  api,
  attachTask,
  createTask,
  createTeam,
  createTeamToken,
  eventually,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import { type PlanRead, startPlanReader } from '../../../../test/support/plan-documents.ts';
import { type RunningWorker, startWorker } from '../../src/worker.ts';
import { ALL_STAGES, PLAN_JSON_MAX_BYTES } from './limits.ts';

/** The API, a worker and a plan-reading task server, local workspaces, and the calls a pipeline makes. */
export function useLocalExecution() {
  const g = {} as {
    h: Harness;
    worker: RunningWorker;
    reader: Awaited<ReturnType<typeof startPlanReader>>;
    f: Fixture;
    localWorkspaceId: string;
    readerToken: string;
    plannerToken: string;
  };

  // One run at a time holds a workspace (the run queue), and these runs wait for their pipeline or for a
  // confirmation: each test starts with the shared workspaces free. Newest first, so no run is admitted
  // while this ends them.
  beforeEach(async () => {
    if (!g.localWorkspaceId) return;
    for (const workspaceId of [g.localWorkspaceId, g.f.workspaceId]) {
      const listed = await api(g.h, 'get', `/workspaces/${workspaceId}/runs?page%5Bsize%5D=100`, g.f.organizationToken);
      for (const run of listed.body.data as { id: string; attributes: { actions: Record<string, boolean> } }[]) {
        const { actions } = run.attributes;
        const action = actions['is-discardable'] ? 'discard' : actions['is-cancelable'] ? 'cancel' : undefined;
        if (action) expect((await api(g.h, 'post', `/runs/${run.id}/actions/${action}`, g.f.organizationToken)).status).toBe(202);
      }
    }
  });

  beforeAll(async () => {
    g.h = await startHarness({
      reachableBaseUrl: true,
      env: { SWEEPER_INTERVAL_SECONDS: '0.5', PLAN_JSON_MAX_BYTES: String(PLAN_JSON_MAX_BYTES) },
    });
    g.worker = await startWorker({
      config: g.h.config,
      orm: g.h.orm,
      logger: g.h.logger,
      secrets: g.h.secrets,
      taskClient: g.h.taskClient,
    });
    g.reader = await startPlanReader();
    g.f = await seedOrganization(g.h, 'local');
    g.localWorkspaceId = await localWorkspace('pipeline');
    await attachTask(g.h, g.f, g.localWorkspaceId, await createTask(g.h, g.f, g.reader.url), 'mandatory', ALL_STAGES);
    const teamToken = async (name: string, access: Record<string, unknown>): Promise<string> => {
      const teamId = await createTeam(g.h, g.f.organization, g.f.organizationToken, name);
      await grantWorkspace(g.h, g.f.organizationToken, teamId, g.localWorkspaceId, access);
      return createTeamToken(g.h, g.f.organizationToken, teamId);
    };
    g.readerToken = await teamToken('readers', { access: 'read' });
    g.plannerToken = await teamToken('planners', { access: 'custom', runs: 'plan' });
  });
  afterAll(async () => {
    await g.worker.close();
    await new Promise((resolve) => g.reader.server.close(resolve));
    await g.h.close();
  });

  async function localWorkspace(label: string): Promise<string> {
    const res = await api(g.h, 'post', `/organizations/${g.f.organization}/workspaces`, g.f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: uniqueName(label), 'execution-mode': 'local' } },
    });
    expect(res.status).toBe(201);
    return res.body.data.id as string;
  }

  const run = async (runId: string) => (await api(g.h, 'get', `/runs/${runId}?include=plan,apply`, g.f.organizationToken)).body;
  const waitFor = (runId: string, status: string, timeoutMs = 15_000) =>
    eventually(async () => ((await run(runId)).data.attributes.status === status ? true : undefined), timeoutMs);
  /** What a report must leave untouched when it is refused. */
  const stored = async (runId: string) =>
    (
      await g.h.orm.em
        .fork()
        .execute(
          `select status, version, plan_json is null as no_plan, has_changes, execution_error, plan_json_sha256, plan_file_sha256 from runs where id = ?`,
          [runId],
        )
    )[0];
  const putPlan = (
    path: string,
    body: string,
    token = g.f.organizationToken,
    type = 'application/json',
    headers: Record<string, string> = {},
  ) => g.h.http.put(`/api/v2${path}`).set('Authorization', `Bearer ${token}`).set('Content-Type', type).set(headers).send(body);
  const readsOf = (runId: string, stage: string): PlanRead[] =>
    g.reader.reads.filter((read) => read.runId === runId && read.stage === stage);
  return Object.assign(g, { localWorkspace, run, waitFor, stored, putPlan, readsOf });
}
