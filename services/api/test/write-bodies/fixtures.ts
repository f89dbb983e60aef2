import { newId, type RunStatus } from '@runtasks/shared/domain';
import { Organization, Run, RunTask, TaskStage, Workspace } from '@runtasks/shared/db';
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { type RouteDef } from '../../src/routes/define.ts';
import { type Harness, startHarness } from '../../../../test/support/harness.ts';
import {
  api,
  createOrganization,
  createRun,
  createTeam,
  createWorkspace,
  grantWorkspace,
  JSON_API,
} from '../../../../test/support/fixtures.ts';
import { type Response, uniqueName } from '../../../../test/support/assertions.ts';
import { encode } from '../../../../test/support/raw-json.ts';
import { type WriteSpec } from './model.ts';
import { setTaskServerUrl, taskServerUrl } from './wrong-values.ts';
import { describeResponse } from './hostile.ts';
import { MAX_PLAN_REPORT_BYTES, MAX_UPLOAD_BYTES } from './uploads.ts';
import { addOrganizationSpecs } from './organizations.specs.ts';
import { addWorkspaceAndRunSpecs } from './workspaces-and-runs.specs.ts';
import { addRunTaskSpecs } from './run-tasks.specs.ts';
import { addVersionAndAdminSpecs } from './versions-and-admin.specs.ts';
import { addTagAndConsumerSpecs } from './tags-and-consumers.specs.ts';
import { addPeopleAndCiSpecs, CI_ISSUER } from './people-and-ci.specs.ts';
import { addNotificationSpecs } from './notifications.specs.ts';
import { startTestIssuer, type TestIssuer } from '../../../../test/support/oidc-issuer.ts';

/** What every property needs: the API, its specs, and the workspaces the raw routes write to. */
export interface WriteContext {
  h: Harness;
  taskServer: Server;
  specs: Record<string, WriteSpec>;
  /** The workspace of the configuration versions (property 6 uploads to versions made there). */
  wsVersions: string;
  /** A local workspace, whose runs wait for their pipeline's reports (property 7 reports plans there). */
  wsPlanReports: string;
  /** The CI issuer on loopback whose identity tokens the exchange's spec sends. */
  issuer: TestIssuer;
}

/** The resources the specs write to, made once before any property runs. */
export type Fixtures = Awaited<ReturnType<typeof createFixtures>> & { wsVersions: string; wsPlanReports: string };

export const sendBody = (h: Harness, route: RouteDef, path: string, body: unknown, token = h.adminToken): Promise<Response> => {
  const method = route.method.toLowerCase() as 'post' | 'patch' | 'put';
  // The identity serializer: superagent would otherwise JSON-encode the Buffer ({"type":"Buffer",…}).
  return h.http[method](`/api/v2${path}`)
    .set('Authorization', `Bearer ${token}`)
    .set('Content-Type', JSON_API)
    .serialize((bytes) => bytes)
    .send(encode(body));
};

/** Starts the API and the task server, makes the fixtures, and builds every WriteSpec. */
export async function startWriteContext(): Promise<WriteContext> {
  const SPECS: Record<string, WriteSpec> = {};
  const issuer = await startTestIssuer();
  const h = await startHarness({
    env: {
      CONFIGURATION_VERSION_MAX_BYTES: String(MAX_UPLOAD_BYTES),
      PLAN_JSON_MAX_BYTES: String(MAX_PLAN_REPORT_BYTES),
      // The issuers CI trust rules may name: a public one (never asked) and the loopback one that signs the exchanges' tokens.
      CI_TOKEN_ISSUERS: `${CI_ISSUER},${issuer.url}`,
    },
  });
  // The verification endpoint of run tasks: 200 to anything but /fail….
  const taskServer = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = req.url?.startsWith('/fail') ? 500 : 200;
      res.end();
    });
  });
  await new Promise<void>((resolve) => taskServer.listen(0, '127.0.0.1', resolve));
  setTaskServerUrl(`http://127.0.0.1:${(taskServer.address() as AddressInfo).port}`);
  const em = () => h.orm.em.fork();

  const f: Fixtures = { ...(await createFixtures(h, em)), wsVersions: '', wsPlanReports: '' };
  // In the order they always ran: the specs make resources of their own as they go.
  await addOrganizationSpecs(SPECS, f);
  await addWorkspaceAndRunSpecs(SPECS, f);
  await addRunTaskSpecs(SPECS, f);
  await addVersionAndAdminSpecs(SPECS, f);
  await addTagAndConsumerSpecs(SPECS, f);
  await addPeopleAndCiSpecs(SPECS, f, issuer);
  await addNotificationSpecs(SPECS, f);
  return { h, taskServer, specs: SPECS, wsVersions: f.wsVersions, wsPlanReports: f.wsPlanReports, issuer };
}

async function createFixtures(h: Harness, em: () => ReturnType<Harness['orm']['em']['fork']>) {
  const admin = h.adminToken;
  const post = async (path: string, body: unknown): Promise<string> => {
    const res = await api(h, 'post', path, admin, body);
    if (res.status !== 201) throw new Error(`POST ${path}: ${describeResponse(res)}`);
    return res.body.data.id as string;
  };
  const main = await createOrganization(h, 'prop-main');
  const patched = await createOrganization(h, 'prop-patched');
  const mainId = (await em().findOneOrFail(Organization, { name: main })).id;
  const patchedId = (await em().findOneOrFail(Organization, { name: patched })).id;

  const workspace = (name: string) => createWorkspace(h, main, admin, name);
  const wsMain = await workspace('ws-main');
  const wsByName = await workspace('ws-by-name');
  const wsById = await workspace('ws-by-id');
  const wsTasks = await workspace('ws-tasks');
  const wsOverride = await workspace('ws-override');
  const wsOther = await createWorkspace(h, patched, admin, 'ws-other');

  const teamPatched = await createTeam(h, main, admin, 'team-patched');
  const teamToken = await createTeam(h, main, admin, 'team-token');
  const teamAccess = await createTeam(h, main, admin, 'team-access');
  const accessPatched = await grantWorkspace(h, admin, teamAccess, wsMain, { access: 'read' });

  const taskDocument = (name: string, url = taskServerUrl) => ({ data: { type: 'tasks', attributes: { name, url, category: 'task' } } });
  const taskPatched = await post(`/organizations/${main}/tasks`, taskDocument('task-patched'));
  const taskAttached = await post(`/organizations/${main}/tasks`, taskDocument('task-attached'));
  const taskOverride = await post(`/organizations/${main}/tasks`, taskDocument('task-override'));
  const attach = (workspaceId: string, taskId: string) =>
    post(`/workspaces/${workspaceId}/tasks`, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
        relationships: { task: { data: { type: 'tasks', id: taskId } } },
      },
    });
  const workspaceTaskPatched = await attach(wsTasks, taskAttached);
  await attach(wsOverride, taskOverride);

  const runWithStatus = async (workspaceId: string, status?: RunStatus): Promise<string> => {
    const runId = await createRun(h, admin, workspaceId);
    if (status) await em().nativeUpdate(Run, { id: runId }, { status });
    return runId;
  };
  const runForActions = await runWithStatus(wsMain);
  const canceledRun = await runWithStatus(wsMain, 'canceled');
  const stageOf = async (status: 'awaiting_override' | 'pending'): Promise<string> => {
    const runId = await runWithStatus(wsOverride);
    const stage = await em().findOneOrFail(TaskStage, { run: runId });
    await em().nativeUpdate(TaskStage, { id: stage.id }, { status });
    return stage.id;
  };
  const stageAwaiting = await stageOf('awaiting_override');
  const stagePending = await stageOf('pending');

  const directTask = async (organizationId: string): Promise<string> => {
    const fork = em();
    const task = fork.create(RunTask, {
      id: newId('task'),
      organization: organizationId,
      name: uniqueName('direct-task'),
      url: taskServerUrl,
      enabled: true,
      globalEnabled: false,
      globalStages: [],
      globalEnforcementLevel: 'advisory',
    });
    await fork.flush();
    return task.id;
  };
  const otherOrganizationTask = await directTask(patchedId);
  const workspaceName = async (id: string): Promise<string> => (await em().findOneOrFail(Workspace, { id })).name;
  return {
    h,
    em,
    admin,
    post,
    main,
    patched,
    mainId,
    patchedId,
    workspace,
    wsMain,
    wsByName,
    wsById,
    wsTasks,
    wsOverride,
    wsOther,
    teamPatched,
    teamToken,
    teamAccess,
    accessPatched,
    taskDocument,
    taskPatched,
    taskAttached,
    taskOverride,
    attach,
    workspaceTaskPatched,
    runWithStatus,
    runForActions,
    canceledRun,
    stageOf,
    stageAwaiting,
    stagePending,
    directTask,
    otherOrganizationTask,
    workspaceName,
  };
}
