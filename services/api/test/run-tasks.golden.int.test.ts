import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { RunTask, TaskResultOutcome } from '@runtasks/shared/db';
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expectError, expectNotFound, NOT_FOUND, uniqueName, type Response } from '../../../test/support/assertions.ts';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  JSON_API,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Golden tests: every run task endpoint, request and response, checked field by field against
 * what go-tfe, the provider and the Terraform CLI decode (docs/api.md, "Compatibility").
 * Documents are compared whole (`toEqual`), so a renamed, retyped, missing or extra attribute fails.
 */

/** go-tfe's `iso8601` layout: literal Z, fractional seconds tolerated, no offsets. */
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const isoTimestamp = () => expect.stringMatching(ISO);
const ID = {
  task: /^task-[A-Za-z0-9]{16}$/,
  workspaceTask: /^wstask-[A-Za-z0-9]{16}$/,
  taskStage: /^ts-[A-Za-z0-9]{16}$/,
  taskResult: /^taskrs-[A-Za-z0-9]{16}$/,
  outcome: /^taskrso-[A-Za-z0-9]{16}$/,
  workspace: /^ws-[A-Za-z0-9]{16}$/,
};

type Stage = 'pre_plan' | 'post_plan' | 'pre_apply' | 'post_apply';
type Enforcement = 'advisory' | 'mandatory';
interface GlobalConfiguration {
  enabled: boolean;
  stages: Stage[];
  'enforcement-level': Enforcement;
}
/** What a task created without global options reports in an entitled organization. */
const GLOBAL_DEFAULT: GlobalConfiguration = { enabled: false, stages: [], 'enforcement-level': 'advisory' };

/** A loopback task server answering every request (the verification POST) with 200. */
interface TaskServer {
  url: string;
  requests: { headers: IncomingHttpHeaders; body: Buffer }[];
  server: Server;
}

async function startTaskServer(): Promise<TaskServer> {
  const requests: TaskServer['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests, server };
}

/** Asserts the status and the JSON:API media type; the message carries the body when the status differs. */
function expectStatus(res: Response, status: number): void {
  expect({ status: res.status, body: res.status === status ? 'as expected' : res.text }).toEqual({ status, body: 'as expected' });
  if (status !== 204) expect(res.headers['content-type']).toContain(JSON_API);
}

/** `meta.pagination` exactly as go-tfe reads it, and the five page links. */
function expectPagination(res: Response, totalCount: number, page = 1, size = 20): void {
  const totalPages = Math.max(1, Math.ceil(totalCount / size));
  expect(res.body.meta).toEqual({
    pagination: {
      'current-page': page,
      'page-size': size,
      'prev-page': page > 1 ? page - 1 : null,
      'next-page': page < totalPages ? page + 1 : null,
      'total-pages': totalPages,
      'total-count': totalCount,
    },
  });
  expect(Object.keys(res.body.links).sort()).toEqual(['first', 'last', 'next', 'prev', 'self']);
  expect(res.body.links.self).toEqual(expect.stringContaining(`page%5Bnumber%5D=${page}`));
}

function idOf(resource: unknown, pattern: RegExp): string {
  const id = (resource as { id?: unknown }).id;
  expect(id).toEqual(expect.stringMatching(pattern));
  return id as string;
}

interface ExpectedTask {
  organization: string;
  name: string;
  url: string;
  description: string | null;
  enabled: boolean;
  workspaceTaskIds?: string[];
  /** `undefined`: the organization is not entitled to global run tasks, so the attribute is absent. */
  global: GlobalConfiguration | undefined;
}

function expectTask(resource: unknown, expected: ExpectedTask): string {
  const id = idOf(resource, ID.task);
  const attributes: Record<string, unknown> = {
    name: expected.name,
    url: expected.url,
    description: expected.description,
    category: 'task',
    'hmac-key': null,
    enabled: expected.enabled,
    'created-at': isoTimestamp(),
    'updated-at': isoTimestamp(),
  };
  if (expected.global) attributes['global-configuration'] = expected.global;
  expect(resource).toEqual({
    id,
    type: 'tasks',
    attributes,
    relationships: {
      organization: { data: { id: expected.organization, type: 'organizations' } },
      'workspace-tasks': { data: (expected.workspaceTaskIds ?? []).map((wstask) => ({ id: wstask, type: 'workspace-tasks' })) },
    },
    links: { self: `/api/v2/tasks/${id}` },
  });
  return id;
}

interface ExpectedWorkspaceTask {
  workspaceId: string;
  taskId: string;
  enforcement: Enforcement;
  stages: Stage[];
}

function expectWorkspaceTask(resource: unknown, expected: ExpectedWorkspaceTask): string {
  const id = idOf(resource, ID.workspaceTask);
  expect(resource).toEqual({
    id,
    type: 'workspace-tasks',
    attributes: {
      'enforcement-level': expected.enforcement,
      stage: expected.stages[0],
      stages: expected.stages,
      'created-at': isoTimestamp(),
      'updated-at': isoTimestamp(),
    },
    relationships: {
      task: { data: { id: expected.taskId, type: 'tasks' } },
      workspace: { data: { id: expected.workspaceId, type: 'workspaces' } },
    },
    links: { self: `/api/v2/workspaces/${expected.workspaceId}/tasks/${id}` },
  });
  return id;
}

interface ExpectedStage {
  runId: string;
  stage: Stage;
  status: string;
  resultIds: string[];
  statusTimestamps?: Record<string, unknown>;
  canOverride?: boolean;
}

function expectTaskStage(resource: unknown, expected: ExpectedStage): string {
  const id = idOf(resource, ID.taskStage);
  const canOverride = expected.canOverride ?? true;
  expect(resource).toEqual({
    id,
    type: 'task-stages',
    attributes: {
      status: expected.status,
      stage: expected.stage,
      'status-timestamps': expected.statusTimestamps ?? {},
      'created-at': isoTimestamp(),
      'updated-at': isoTimestamp(),
      permissions: { 'can-override-policy': false, 'can-override-tasks': canOverride, 'can-override': canOverride },
      actions: { 'is-overridable': expected.status === 'awaiting_override' && canOverride },
    },
    relationships: {
      run: { data: { id: expected.runId, type: 'runs' } },
      'task-results': { data: expected.resultIds.map((result) => ({ id: result, type: 'task-results' })) },
      'policy-evaluations': { data: [] },
    },
    links: { self: `/api/v2/task-stages/${id}` },
  });
  return id;
}

interface ExpectedResult {
  stageId: string;
  taskId: string;
  taskName: string;
  taskUrl: string;
  stage: Stage;
  workspaceTaskId: string | null;
  enforcement: Enforcement;
  isSpeculative?: boolean;
  outcomesCount?: number;
  /** `pending` with no timestamps unless told. */
  status?: string;
  statusTimestamps?: Record<string, unknown>;
}

/** A stage, or a result, as its run's creation leaves it: a run with pre_plan tasks starts that stage then. */
const asCreated = (stage: Stage): { status: string; statusTimestamps: Record<string, unknown> } =>
  stage === 'pre_plan'
    ? { status: 'running', statusTimestamps: { 'running-at': isoTimestamp() } }
    : { status: 'pending', statusTimestamps: {} };

function expectTaskResult(resource: unknown, expected: ExpectedResult): string {
  const id = idOf(resource, ID.taskResult);
  const stage = { data: { id: expected.stageId, type: 'task-stages' } };
  expect(resource).toEqual({
    id,
    type: 'task-results',
    attributes: {
      message: null,
      status: expected.status ?? 'pending',
      'status-timestamps': expected.statusTimestamps ?? {},
      url: null,
      'created-at': isoTimestamp(),
      'updated-at': isoTimestamp(),
      'task-id': expected.taskId,
      'task-name': expected.taskName,
      'task-url': expected.taskUrl,
      stage: expected.stage,
      'is-speculative': expected.isSpeculative ?? false,
      'workspace-task-id': expected.workspaceTaskId,
      'workspace-task-enforcement-level': expected.enforcement,
      'agent-pool-id': null,
      'task-result-outcomes-count': expected.outcomesCount ?? 0,
    },
    relationships: { 'task-stage': stage, task_stage: stage },
    links: { self: `/api/v2/task-results/${id}` },
  });
  return id;
}

/** The workspace document as `include=…workspace` embeds it. */
function expectWorkspace(resource: unknown, workspaceId: string, name: string, organization: string): void {
  expect(resource).toEqual({
    id: workspaceId,
    type: 'workspaces',
    attributes: expect.objectContaining({ name, 'created-at': isoTimestamp(), 'updated-at': isoTimestamp() }),
    relationships: { organization: { data: { id: organization, type: 'organizations' } } },
    links: {
      self: `/api/v2/organizations/${organization}/workspaces/${name}`,
      'self-html': `/app/${organization}/workspaces/${name}`,
    },
  });
}

/** HCP's body: go-tfe maps a 400 containing "Invalid include parameter" to ErrInvalidIncludeValue; the CLI checks the suffix. */
function expectIncludeError(res: Response): void {
  const error = expectError(res, 400);
  expect({ title: error.title, detail: error.detail }).toEqual({ title: 'bad request', detail: 'Invalid include parameter' });
  expect(error.source).toEqual({ parameter: 'include' });
}

describe('run tasks API golden documents', () => {
  let h: Harness;
  let taskServer: TaskServer;
  /** A standard organization, entitled to global run tasks. */
  let std: Fixture;

  const taskDocument = (attributes: Record<string, unknown>) => ({
    data: { type: 'tasks', attributes: { category: 'task', url: taskServer.url, ...attributes } },
  });
  const createTask = (fixture: Fixture, attributes: Record<string, unknown>) =>
    api(h, 'post', `/organizations/${fixture.organization}/tasks`, fixture.organizationToken, taskDocument(attributes));

  async function newTask(fixture: Fixture, attributes: Record<string, unknown> = {}): Promise<{ id: string; name: string }> {
    const name = uniqueName('task');
    const res = await createTask(fixture, { name, ...attributes });
    expectStatus(res, 201);
    return { id: res.body.data.id as string, name };
  }

  const associationDocument = (taskId: string, attributes: Record<string, unknown>) => ({
    data: { type: 'workspace-tasks', attributes, relationships: { task: { data: { type: 'tasks', id: taskId } } } },
  });
  const associate = (token: string, workspaceId: string, taskId: string, attributes: Record<string, unknown>) =>
    api(h, 'post', `/workspaces/${workspaceId}/tasks`, token, associationDocument(taskId, attributes));

  async function newAssociation(
    fixture: Fixture,
    workspaceId: string,
    taskId: string,
    attributes: Record<string, unknown>,
  ): Promise<string> {
    const res = await associate(fixture.organizationToken, workspaceId, taskId, attributes);
    expectStatus(res, 201);
    return res.body.data.id as string;
  }

  async function stagesOf(fixture: Fixture, runId: string): Promise<Response> {
    const res = await api(h, 'get', `/runs/${runId}/task-stages`, fixture.organizationToken);
    expectStatus(res, 200);
    return res;
  }

  /** A fresh standard organization with a workspace running one task on `stages`: its run, stage ids and result ids. */
  async function runWithTask(
    stages: Stage[],
    enforcement: Enforcement = 'mandatory',
  ): Promise<{ fixture: Fixture; taskId: string; taskName: string; workspaceTaskId: string; runId: string; stageIds: string[] }> {
    const fixture = await seedOrganization(h, uniqueName('golden-run'));
    const task = await newTask(fixture);
    const workspaceTaskId = await newAssociation(fixture, fixture.workspaceId, task.id, { 'enforcement-level': enforcement, stages });
    const runId = await createRun(h, fixture.organizationToken, fixture.workspaceId);
    const listed = await stagesOf(fixture, runId);
    return {
      fixture,
      taskId: task.id,
      taskName: task.name,
      workspaceTaskId,
      runId,
      stageIds: (listed.body.data as { id: string }[]).map((stage) => stage.id),
    };
  }

  beforeAll(async () => {
    h = await startHarness();
    taskServer = await startTaskServer();
    std = await seedOrganization(h, uniqueName('golden-std'));
  });

  afterAll(async () => {
    await h?.close();
    taskServer?.server.closeAllConnections();
    await new Promise<void>((resolve) => (taskServer ? taskServer.server.close(() => resolve()) : resolve()));
  });

  describe('organization tasks', () => {
    it('create → 201 with the whole tasks document; global-configuration stage order kept; hmac-key never echoed', async () => {
      const name = uniqueName('task');
      const before = taskServer.requests.length;
      const res = await createTask(std, {
        name,
        description: null,
        'hmac-key': 'golden-secret',
        enabled: true,
        'global-configuration': { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(res, 201);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTask(res.body.data, {
        organization: std.organization,
        name,
        url: taskServer.url,
        description: null,
        enabled: true,
        global: { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expect(res.text).not.toContain('golden-secret');
      // The verification request was sent once, signed with the key.
      expect(taskServer.requests.length).toBe(before + 1);
      const verification = taskServer.requests[before];
      expect(verification?.headers['x-tfc-task-signature']).toBe(
        createHmac('sha512', 'golden-secret')
          .update(verification?.body ?? '')
          .digest('hex'),
      );
    });

    it('create accepts `hmac_key` (underscore) and signs the verification with it', async () => {
      const before = taskServer.requests.length;
      const name = uniqueName('task');
      const res = await createTask(std, { name, hmac_key: 'underscore-secret' });
      expectStatus(res, 201);
      expect(res.body.data.attributes['hmac-key']).toBeNull();
      expect(res.body.data.attributes).not.toHaveProperty('hmac_key');
      const verification = taskServer.requests[before];
      expect(verification?.headers['x-tfc-task-signature']).toBe(
        createHmac('sha512', 'underscore-secret')
          .update(verification?.body ?? '')
          .digest('hex'),
      );
    });

    it('`enabled` accepts "true"/"false" strings and answers booleans (create and update)', async () => {
      const name = uniqueName('task');
      const created = await createTask(std, { name, enabled: 'false', description: 'strings' });
      expectStatus(created, 201);
      const id = expectTask(created.body.data, {
        organization: std.organization,
        name,
        url: taskServer.url,
        description: 'strings',
        enabled: false,
        global: GLOBAL_DEFAULT,
      });
      const enabled = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, {
        data: { type: 'tasks', attributes: { enabled: 'true' } },
      });
      expectStatus(enabled, 200);
      expect(enabled.body.data.attributes.enabled).toBe(true);
      const disabled = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, {
        data: { type: 'tasks', attributes: { enabled: 'false' } },
      });
      expectStatus(disabled, 200);
      expect(disabled.body.data.attributes.enabled).toBe(false);
      const shown = await api(h, 'get', `/tasks/${id}`, std.organizationToken);
      expect(shown.body.data.attributes.enabled).toBe(false);
    });

    it('show → 200 with the same document as create', async () => {
      const name = uniqueName('task');
      const created = await createTask(std, { name, description: 'show me' });
      expectStatus(created, 201);
      const res = await api(h, 'get', `/tasks/${created.body.data.id}`, std.organizationToken);
      expectStatus(res, 200);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTask(res.body.data, {
        organization: std.organization,
        name,
        url: taskServer.url,
        description: 'show me',
        enabled: true,
        global: GLOBAL_DEFAULT,
      });
      expect(res.body.data).toEqual(created.body.data);
    });

    it('list → 200 with tasks documents, links and meta.pagination; paged', async () => {
      const fixture = await seedOrganization(h, uniqueName('golden-list'));
      const first = await newTask(fixture);
      const second = await newTask(fixture, { description: 'second' });
      const third = await newTask(fixture, { enabled: false });
      const res = await api(h, 'get', `/organizations/${fixture.organization}/tasks`, fixture.organizationToken);
      expectStatus(res, 200);
      expectPagination(res, 3);
      expect(res.body).not.toHaveProperty('included');
      expect(res.body.data).toHaveLength(3);
      const [a, b, c] = res.body.data as unknown[];
      const base = { organization: fixture.organization, url: taskServer.url, global: GLOBAL_DEFAULT };
      expectTask(a, { ...base, name: first.name, description: null, enabled: true });
      expectTask(b, { ...base, name: second.name, description: 'second', enabled: true });
      expectTask(c, { ...base, name: third.name, description: null, enabled: false });

      const paged = await api(
        h,
        'get',
        `/organizations/${fixture.organization}/tasks?page%5Bnumber%5D=2&page%5Bsize%5D=2`,
        fixture.organizationToken,
      );
      expectStatus(paged, 200);
      expectPagination(paged, 3, 2, 2);
      expect((paged.body.data as { id: string }[]).map((task) => task.id)).toEqual([third.id]);

      // Past the last page: no row carries the total, which is still counted.
      const past = await api(
        h,
        'get',
        `/organizations/${fixture.organization}/tasks?page%5Bnumber%5D=3&page%5Bsize%5D=2`,
        fixture.organizationToken,
      );
      expectStatus(past, 200);
      expect(past.body.data).toEqual([]);
      expect(past.body.meta.pagination).toMatchObject({ 'current-page': 3, 'total-count': 3, 'total-pages': 2 });
    });

    it("counts the organization's tasks exactly: API creates and deletes, rows written directly, nothing of other organizations", async () => {
      const fixture = await seedOrganization(h, uniqueName('golden-count'));
      const other = await seedOrganization(h, uniqueName('golden-count-other'));
      const total = async (): Promise<unknown> =>
        (await api(h, 'get', `/organizations/${fixture.organization}/tasks?page%5Bsize%5D=1`, fixture.organizationToken)).body.meta
          .pagination['total-count'];
      expect(await total()).toBe(0);
      const first = await newTask(fixture);
      await newTask(fixture);
      await newTask(other);
      expect(await total()).toBe(2);
      expectStatus(await api(h, 'delete', `/tasks/${first.id}`, fixture.organizationToken), 204);
      expect(await total()).toBe(1);
      // Written past the API (a bulk load, a manual fix): the count follows the rows all the same.
      const connection = h.orm.em.fork().getConnection();
      const [org] = await connection.execute<{ id: string }[]>(`select id from organizations where name = ?`, [fixture.organization]);
      await connection.execute(
        `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         select 'task-' || substr(md5(random()::text), 1, 16), ?, 'bulk-' || n, 'https://example.com', 'task', true, false, '{}', 'advisory', now(), now()
           from generate_series(1, 5) n`,
        [org?.id],
      );
      expect(await total()).toBe(6);
      await connection.execute(`delete from run_tasks where organization_id = ? and name like 'bulk-%'`, [org?.id]);
      expect(await total()).toBe(1);
    });

    describe('include', () => {
      let fixture: Fixture;
      let task: { id: string; name: string };
      let otherWorkspaceId: string;
      let otherWorkspaceName: string;
      let workspaceTaskIds: string[];

      beforeAll(async () => {
        fixture = await seedOrganization(h, uniqueName('golden-include'));
        task = await newTask(fixture);
        otherWorkspaceName = uniqueName('ws');
        otherWorkspaceId = await createWorkspace(h, fixture.organization, fixture.organizationToken, otherWorkspaceName);
        workspaceTaskIds = [
          await newAssociation(fixture, fixture.workspaceId, task.id, { 'enforcement-level': 'advisory' }),
          await newAssociation(fixture, otherWorkspaceId, task.id, { 'enforcement-level': 'mandatory', stages: ['pre_plan'] }),
        ];
      });

      const expectedTask = () => ({
        organization: fixture.organization,
        name: task.name,
        url: taskServer.url,
        description: null,
        enabled: true,
        global: GLOBAL_DEFAULT,
        workspaceTaskIds,
      });

      function expectIncludedWorkspaceTasks(included: unknown[]): void {
        const byId = new Map(included.map((resource) => [(resource as { id: string }).id, resource]));
        expectWorkspaceTask(byId.get(workspaceTaskIds[0] ?? ''), {
          workspaceId: fixture.workspaceId,
          taskId: task.id,
          enforcement: 'advisory',
          stages: ['post_plan'],
        });
        expectWorkspaceTask(byId.get(workspaceTaskIds[1] ?? ''), {
          workspaceId: otherWorkspaceId,
          taskId: task.id,
          enforcement: 'mandatory',
          stages: ['pre_plan'],
        });
      }

      it('without include: the workspace-tasks relationship alone, no included', async () => {
        const res = await api(h, 'get', `/tasks/${task.id}`, fixture.organizationToken);
        expectStatus(res, 200);
        expectTask(res.body.data, expectedTask());
        expect(res.body).not.toHaveProperty('included');
      });

      it.each(['workspace_tasks', 'workspace-tasks'])('show ?include=%s → included workspace-tasks documents', async (include) => {
        const res = await api(h, 'get', `/tasks/${task.id}?include=${include}`, fixture.organizationToken);
        expectStatus(res, 200);
        expectTask(res.body.data, expectedTask());
        expect(res.body.included).toHaveLength(2);
        expectIncludedWorkspaceTasks(res.body.included);
      });

      it.each(['workspace_tasks.workspace', 'workspace-tasks.workspace'])(
        'show and list ?include=%s → workspace-tasks and their workspaces',
        async (include) => {
          for (const path of [`/tasks/${task.id}`, `/organizations/${fixture.organization}/tasks`]) {
            const res = await api(h, 'get', `${path}?include=${include}`, fixture.organizationToken);
            expectStatus(res, 200);
            const included = res.body.included as { type: string; id: string }[];
            expect(included.map((resource) => resource.type).sort()).toEqual([
              'workspace-tasks',
              'workspace-tasks',
              'workspaces',
              'workspaces',
            ]);
            expectIncludedWorkspaceTasks(included.filter((resource) => resource.type === 'workspace-tasks'));
            const workspaces = new Map(
              included.filter((resource) => resource.type === 'workspaces').map((resource) => [resource.id, resource]),
            );
            expectWorkspace(workspaces.get(fixture.workspaceId), fixture.workspaceId, `${fixture.organization}-ws`, fixture.organization);
            expectWorkspace(workspaces.get(otherWorkspaceId), otherWorkspaceId, otherWorkspaceName, fixture.organization);
          }
        },
      );

      it('list without include (one statement) → each task with its workspace-tasks in the order attached, none for a task without', async () => {
        const own = await seedOrganization(h, uniqueName('golden-attached'));
        const [attached, bare] = [await newTask(own), await newTask(own)];
        const otherWorkspace = await createWorkspace(h, own.organization, own.organizationToken, uniqueName('ws'));
        const ids = [
          await newAssociation(own, otherWorkspace, attached.id, { 'enforcement-level': 'advisory' }),
          await newAssociation(own, own.workspaceId, attached.id, { 'enforcement-level': 'mandatory' }),
        ];
        const res = await api(h, 'get', `/organizations/${own.organization}/tasks`, own.organizationToken);
        expectStatus(res, 200);
        const expected = { organization: own.organization, url: taskServer.url, description: null, enabled: true, global: GLOBAL_DEFAULT };
        expect((res.body.data as { id: string }[]).map((resource) => resource.id)).toEqual([attached.id, bare.id]);
        expectTask(res.body.data[0], { ...expected, name: attached.name, workspaceTaskIds: ids });
        expectTask(res.body.data[1], { ...expected, name: bare.name, workspaceTaskIds: [] });
      });

      it('list ?include=workspace_tasks → included workspace-tasks documents, with meta', async () => {
        const res = await api(h, 'get', `/organizations/${fixture.organization}/tasks?include=workspace_tasks`, fixture.organizationToken);
        expectStatus(res, 200);
        expectPagination(res, 1);
        expectTask(res.body.data[0], expectedTask());
        expectIncludedWorkspaceTasks(res.body.included);
      });

      it.each(['workspaces', 'workspace_tasks,organization', 'tasks', 'workspace_tasks.run'])(
        'unknown ?include=%s → 400 naming the include parameter (show and list)',
        async (include) => {
          expectIncludeError(await api(h, 'get', `/tasks/${task.id}?include=${include}`, fixture.organizationToken));
          expectIncludeError(
            await api(h, 'get', `/organizations/${fixture.organization}/tasks?include=${include}`, fixture.organizationToken),
          );
        },
      );
    });

    it('update → 200; omitted attributes keep their values; data.id is accepted; no verification unless URL or key change', async () => {
      const name = uniqueName('task');
      const created = await createTask(std, {
        name,
        description: 'before',
        enabled: false,
        'hmac-key': 'kept-key',
        'global-configuration': { enabled: true, stages: ['pre_apply'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(created, 201);
      const id = created.body.data.id as string;
      const before = taskServer.requests.length;
      const res = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, {
        data: { type: 'tasks', id, attributes: { description: 'after' } },
      });
      expectStatus(res, 200);
      expectTask(res.body.data, {
        organization: std.organization,
        name,
        url: taskServer.url,
        description: 'after',
        enabled: false,
        global: { enabled: true, stages: ['pre_apply'], 'enforcement-level': 'mandatory' },
      });
      expect(res.body.data.attributes['created-at']).toBe(created.body.data.attributes['created-at']);
      expect(Date.parse(res.body.data.attributes['updated-at'])).toBeGreaterThanOrEqual(
        Date.parse(created.body.data.attributes['updated-at']),
      );
      expect(taskServer.requests.length).toBe(before);

      // A new URL is verified with the key kept from before (the key was omitted, so it is unchanged).
      const newUrl = `${taskServer.url}/moved`;
      const moved = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, { data: { type: 'tasks', attributes: { url: newUrl } } });
      expectStatus(moved, 200);
      expect(moved.body.data.attributes).toMatchObject({ name, url: newUrl, description: 'after', enabled: false, 'hmac-key': null });
      expect(taskServer.requests.length).toBe(before + 1);
      const verification = taskServer.requests[before];
      expect(verification?.headers['x-tfc-task-signature']).toBe(
        createHmac('sha512', 'kept-key')
          .update(verification?.body ?? '')
          .digest('hex'),
      );
    });

    it('update merges global-configuration: {"enabled": false} alone keeps stages and enforcement-level', async () => {
      const created = await createTask(std, {
        name: uniqueName('task'),
        'global-configuration': { enabled: true, stages: ['post_plan', 'pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(created, 201);
      const id = created.body.data.id as string;
      const res = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, {
        data: { type: 'tasks', attributes: { 'global-configuration': { enabled: false } } },
      });
      expectStatus(res, 200);
      expect(res.body.data.attributes['global-configuration']).toEqual({
        enabled: false,
        stages: ['post_plan', 'pre_plan'],
        'enforcement-level': 'mandatory',
      });
      const stagesOnly = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, {
        data: { type: 'tasks', attributes: { 'global-configuration': { stages: ['post_apply'] } } },
      });
      expectStatus(stagesOnly, 200);
      expect(stagesOnly.body.data.attributes['global-configuration']).toEqual({
        enabled: false,
        stages: ['post_apply'],
        'enforcement-level': 'mandatory',
      });
      const shown = await api(h, 'get', `/tasks/${id}`, std.organizationToken);
      expect(shown.body.data.attributes['global-configuration']).toEqual(stagesOnly.body.data.attributes['global-configuration']);
    });

    it('a free organization (not entitled) has no global-configuration attribute, and global options sent are ignored', async () => {
      const organization = await createOrganization(h, uniqueName('golden-free-global'), { edition: 'free' });
      const token = await createOrganizationToken(h, organization);
      const fixture: Fixture = { organization, organizationToken: token, workspaceId: '', teamId: '' };
      const name = uniqueName('task');
      const created = await createTask(fixture, {
        name,
        'global-configuration': { enabled: true, stages: ['pre_plan'], 'enforcement-level': 'mandatory' },
      });
      expectStatus(created, 201);
      const id = expectTask(created.body.data, {
        organization,
        name,
        url: taskServer.url,
        description: null,
        enabled: true,
        global: undefined,
      });
      expect(created.body.data.attributes).not.toHaveProperty('global-configuration');

      const updated = await api(h, 'patch', `/tasks/${id}`, token, {
        data: { type: 'tasks', attributes: { 'global-configuration': { enabled: true, stages: ['post_plan'] } } },
      });
      expectStatus(updated, 200);
      expect(updated.body.data.attributes).not.toHaveProperty('global-configuration');
      const stored = await h.orm.em.fork().findOneOrFail(RunTask, { id });
      expect({ enabled: stored.globalEnabled, stages: stored.globalStages, level: stored.globalEnforcementLevel }).toEqual({
        enabled: false,
        stages: [],
        level: 'advisory',
      });
    });

    it('description of 300 characters is accepted; 301 → 422 at /data/attributes/description (create and update)', async () => {
      const ok = await createTask(std, { name: uniqueName('task'), description: 'é'.repeat(300) });
      expectStatus(ok, 201);
      expect(ok.body.data.attributes.description).toBe('é'.repeat(300));
      const id = ok.body.data.id as string;
      expectError(await createTask(std, { name: uniqueName('task'), description: 'x'.repeat(301) }), 422, '/data/attributes/description');
      const patched = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, {
        data: { type: 'tasks', attributes: { description: 'x'.repeat(301) } },
      });
      expectError(patched, 422, '/data/attributes/description');
      expect((await api(h, 'get', `/tasks/${id}`, std.organizationToken)).body.data.attributes.description).toBe('é'.repeat(300));
    });

    it('a name with a space → 422 at /data/attributes/name (create and update)', async () => {
      const name = `golden task ${uniqueName('n')}`;
      expectError(await createTask(std, { name }), 422, '/data/attributes/name');
      const { id } = await newTask(std);
      expectError(
        await api(h, 'patch', `/tasks/${id}`, std.organizationToken, { data: { type: 'tasks', attributes: { name } } }),
        422,
        '/data/attributes/name',
      );
      const list = await api(h, 'get', `/organizations/${std.organization}/tasks?page%5Bsize%5D=100`, std.organizationToken);
      expect((list.body.data as { attributes: { name: string } }[]).map((task) => task.attributes.name)).not.toContain(name);
    });

    it.each(['hook', 'Task', ''])('category %j → 422 at /data/attributes/category', async (category) => {
      expectError(await createTask(std, { name: uniqueName('task'), category }), 422, '/data/attributes/category');
    });

    it('a duplicate name in the organization → 422 "has already been taken" at /data/attributes/name; another organization may reuse it', async () => {
      const { name } = await newTask(std);
      const error = expectError(await createTask(std, { name }), 422, '/data/attributes/name');
      expect(error.detail).toContain('has already been taken');
      const { id } = await newTask(std);
      const renamed = await api(h, 'patch', `/tasks/${id}`, std.organizationToken, { data: { type: 'tasks', attributes: { name } } });
      expect(expectError(renamed, 422, '/data/attributes/name').detail).toContain('has already been taken');
      const other = await seedOrganization(h, uniqueName('golden-dup'));
      expectStatus(await createTask(other, { name }), 201);
    });

    it('delete → 204 without a body; removes its workspace tasks; existing task results keep their snapshot; repeat → 404', async () => {
      const { fixture, taskId, taskName, workspaceTaskId, runId, stageIds } = await runWithTask(['post_plan']);
      const stage = await api(h, 'get', `/task-stages/${stageIds[0]}`, fixture.organizationToken);
      const resultId = stage.body.data.relationships['task-results'].data[0].id as string;

      const res = await api(h, 'delete', `/tasks/${taskId}`, fixture.organizationToken);
      expectStatus(res, 204);
      expect(res.text).toBe('');
      expectNotFound(await api(h, 'get', `/tasks/${taskId}`, fixture.organizationToken));
      expectNotFound(await api(h, 'get', `/workspaces/${fixture.workspaceId}/tasks/${workspaceTaskId}`, fixture.organizationToken));
      const associations = await api(h, 'get', `/workspaces/${fixture.workspaceId}/tasks`, fixture.organizationToken);
      expect(associations.body.data).toEqual([]);
      expectPagination(associations, 0);

      const result = await api(h, 'get', `/task-results/${resultId}`, fixture.organizationToken);
      expectStatus(result, 200);
      expectTaskResult(result.body.data, {
        stageId: stageIds[0] ?? '',
        taskId,
        taskName,
        taskUrl: taskServer.url,
        stage: 'post_plan',
        workspaceTaskId,
        enforcement: 'mandatory',
      });
      expectStatus(await api(h, 'get', `/runs/${runId}`, fixture.organizationToken), 200);
      expectNotFound(await api(h, 'delete', `/tasks/${taskId}`, fixture.organizationToken));
    });
  });

  describe('workspace task associations', () => {
    let fixture: Fixture;
    let taskId: string;

    beforeAll(async () => {
      fixture = await seedOrganization(h, uniqueName('golden-wstask'));
      taskId = (await newTask(fixture)).id;
    });

    /** A workspace of its own per test: one association per (workspace, task). */
    const freshWorkspace = () => createWorkspace(h, fixture.organization, fixture.organizationToken, uniqueName('ws'));

    it('associate → 201 WITH the document; stages order preserved, stage == stages[0]', async () => {
      const workspaceId = await freshWorkspace();
      const res = await associate(fixture.organizationToken, workspaceId, taskId, {
        'enforcement-level': 'mandatory',
        stages: ['post_plan', 'pre_plan'],
      });
      expectStatus(res, 201);
      expect(Object.keys(res.body)).toEqual(['data']);
      const id = expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'mandatory', stages: ['post_plan', 'pre_plan'] });
      const task = await api(h, 'get', `/tasks/${taskId}`, fixture.organizationToken);
      expect(task.body.data.relationships['workspace-tasks'].data).toContainEqual({ id, type: 'workspace-tasks' });
    });

    it.each<[string, Record<string, unknown>, Stage[]]>([
      ['only stage: pre_apply', { stage: 'pre_apply' }, ['pre_apply']],
      ['neither stage nor stages', {}, ['post_plan']],
      ['stages wins over stage', { stage: 'pre_plan', stages: ['post_apply'] }, ['post_apply']],
      [
        'all four stages',
        { stages: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] },
        ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'],
      ],
      ['stage: post_apply', { stage: 'post_apply' }, ['post_apply']],
    ])('associate with %s → stages %j', async (_label, attributes, stages) => {
      const workspaceId = await freshWorkspace();
      const res = await associate(fixture.organizationToken, workspaceId, taskId, { 'enforcement-level': 'advisory', ...attributes });
      expectStatus(res, 201);
      expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'advisory', stages });
    });

    it('show → 200; list → 200 with meta.pagination', async () => {
      const workspaceId = await freshWorkspace();
      const secondTask = await newTask(fixture);
      const first = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory', stages: ['pre_plan'] });
      const second = await newAssociation(fixture, workspaceId, secondTask.id, { 'enforcement-level': 'mandatory' });
      const shown = await api(h, 'get', `/workspaces/${workspaceId}/tasks/${first}`, fixture.organizationToken);
      expectStatus(shown, 200);
      expect(Object.keys(shown.body)).toEqual(['data']);
      expectWorkspaceTask(shown.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: ['pre_plan'] });

      const list = await api(h, 'get', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken);
      expectStatus(list, 200);
      expectPagination(list, 2);
      const byId = new Map((list.body.data as { id: string }[]).map((resource) => [resource.id, resource]));
      expect([...byId.keys()].sort()).toEqual([first, second].sort());
      expectWorkspaceTask(byId.get(first), { workspaceId, taskId, enforcement: 'advisory', stages: ['pre_plan'] });
      expectWorkspaceTask(byId.get(second), { workspaceId, taskId: secondTask.id, enforcement: 'mandatory', stages: ['post_plan'] });

      const paged = await api(h, 'get', `/workspaces/${workspaceId}/tasks?page%5Bsize%5D=1&page%5Bnumber%5D=2`, fixture.organizationToken);
      expectStatus(paged, 200);
      expectPagination(paged, 2, 2, 1);
      expect(paged.body.data).toHaveLength(1);
    });

    it('update → 200 with the document: all four stages accepted; only `stage` sets stages; omitted attributes kept', async () => {
      const workspaceId = await freshWorkspace();
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory', stages: ['post_plan'] });
      const patch = (attributes: Record<string, unknown>) =>
        api(h, 'patch', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken, {
          data: { type: 'workspace-tasks', attributes },
        });

      const all = await patch({ stages: ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'] });
      expectStatus(all, 200);
      expectWorkspaceTask(all.body.data, {
        workspaceId,
        taskId,
        enforcement: 'advisory',
        stages: ['post_apply', 'pre_apply', 'post_plan', 'pre_plan'],
      });
      for (const stage of ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'] as const) {
        const res = await patch({ stage });
        expectStatus(res, 200);
        expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: [stage] });
      }
      const enforcement = await patch({ 'enforcement-level': 'mandatory' });
      expectStatus(enforcement, 200);
      expectWorkspaceTask(enforcement.body.data, { workspaceId, taskId, enforcement: 'mandatory', stages: ['post_apply'] });
      const shown = await api(h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expect(shown.body.data).toEqual(enforcement.body.data);
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['stages: [plan]', { stages: ['plan'] }, '/data/attributes/stages/0'],
      ['stage: apply', { stage: 'apply' }, '/data/attributes/stage'],
      ['stages: []', { stages: [] }, '/data/attributes/stages'],
      ['stages repeated', { stages: ['pre_plan', 'pre_plan'] }, '/data/attributes/stages'],
      ['enforcement-level: blocking', { 'enforcement-level': 'blocking' }, '/data/attributes/enforcement-level'],
    ])('invalid %s → 422 on create and on update', async (_label, attributes, pointer) => {
      const workspaceId = await freshWorkspace();
      expectError(
        await associate(fixture.organizationToken, workspaceId, taskId, { 'enforcement-level': 'advisory', ...attributes }),
        422,
        pointer,
      );
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' });
      const res = await api(h, 'patch', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken, {
        data: { type: 'workspace-tasks', attributes },
      });
      expectError(res, 422, pointer);
      const shown = await api(h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expectWorkspaceTask(shown.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: ['post_plan'] });
    });

    it('a task of another organization → 404, and nothing is associated', async () => {
      const other = await seedOrganization(h, uniqueName('golden-other'));
      const foreignTask = await newTask(other);
      const workspaceId = await freshWorkspace();
      const res = await associate(fixture.organizationToken, workspaceId, foreignTask.id, { 'enforcement-level': 'advisory' });
      expectNotFound(res);
      const list = await api(h, 'get', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken);
      expect(list.body.data).toEqual([]);
    });

    it('a team with workspace run-tasks permission can associate; a team without it → 404', async () => {
      const workspaceId = await freshWorkspace();
      const allowedTeam = await createTeam(h, fixture.organization, fixture.organizationToken, uniqueName('team-run-tasks'));
      await grantWorkspace(h, fixture.organizationToken, allowedTeam, workspaceId, { access: 'custom', runs: 'read', 'run-tasks': true });
      const deniedTeam = await createTeam(h, fixture.organization, fixture.organizationToken, uniqueName('team-write'));
      // "write" access: runs apply, but not run-tasks.
      await grantWorkspace(h, fixture.organizationToken, deniedTeam, workspaceId, { access: 'write' });
      const allowedToken = await createTeamToken(h, fixture.organizationToken, allowedTeam);
      const deniedToken = await createTeamToken(h, fixture.organizationToken, deniedTeam);

      expectNotFound(await associate(deniedToken, workspaceId, taskId, { 'enforcement-level': 'advisory' }));
      expectNotFound(await api(h, 'get', `/workspaces/${workspaceId}/tasks`, deniedToken));
      const res = await associate(allowedToken, workspaceId, taskId, { 'enforcement-level': 'advisory', stages: ['pre_plan'] });
      expectStatus(res, 201);
      const id = expectWorkspaceTask(res.body.data, { workspaceId, taskId, enforcement: 'advisory', stages: ['pre_plan'] });
      expectNotFound(await api(h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, deniedToken));
      expectNotFound(await api(h, 'delete', `/workspaces/${workspaceId}/tasks/${id}`, deniedToken));
      const list = await api(h, 'get', `/workspaces/${workspaceId}/tasks`, allowedToken);
      expectStatus(list, 200);
      expect((list.body.data as { id: string }[]).map((resource) => resource.id)).toEqual([id]);
    });

    it('a duplicate association → 422, and the first one is untouched', async () => {
      const workspaceId = await freshWorkspace();
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' });
      const error = expectError(
        await associate(fixture.organizationToken, workspaceId, taskId, { 'enforcement-level': 'mandatory' }),
        422,
        '/data/relationships/task',
      );
      expect(error.detail).toContain('has already been taken');
      const list = await api(h, 'get', `/workspaces/${workspaceId}/tasks`, fixture.organizationToken);
      expect(list.body.data).toHaveLength(1);
      expectWorkspaceTask(list.body.data[0], { workspaceId, taskId, enforcement: 'advisory', stages: ['post_plan'] });
      expect(list.body.data[0].id).toBe(id);
    });

    it('delete → 204 without a body; repeat delete → 404; the task itself stays', async () => {
      const workspaceId = await freshWorkspace();
      const id = await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' });
      const res = await api(h, 'delete', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expectStatus(res, 204);
      expect(res.text).toBe('');
      expectNotFound(await api(h, 'get', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken));
      const repeat = await api(h, 'delete', `/workspaces/${workspaceId}/tasks/${id}`, fixture.organizationToken);
      expectNotFound(repeat);
      const task = await api(h, 'get', `/tasks/${taskId}`, fixture.organizationToken);
      expectStatus(task, 200);
      expect(task.body.data.relationships['workspace-tasks'].data).not.toContainEqual({ id, type: 'workspace-tasks' });
    });
  });

  describe('editions', () => {
    it('free: a second run task → 422 with a clear message, nothing stored, no verification sent', async () => {
      const organization = await createOrganization(h, uniqueName('golden-free'), { edition: 'free' });
      const fixture: Fixture = {
        organization,
        organizationToken: await createOrganizationToken(h, organization),
        workspaceId: '',
        teamId: '',
      };
      await newTask(fixture);
      const before = taskServer.requests.length;
      const error = expectError(await createTask(fixture, { name: uniqueName('task') }), 422);
      expect(error.title).toBe('run task limit reached');
      expect(error.detail).toMatch(/free edition/i);
      expect(error.detail).toContain('1 run task');
      expect(taskServer.requests.length).toBe(before);
      const list = await api(h, 'get', `/organizations/${organization}/tasks`, fixture.organizationToken);
      expectPagination(list, 1);
    });

    it('free: the task applies to ten workspaces; the 11th → 422 with a clear message; freeing one makes room', async () => {
      const organization = await createOrganization(h, uniqueName('golden-free-ws'), { edition: 'free' });
      const token = await createOrganizationToken(h, organization);
      const fixture: Fixture = { organization, organizationToken: token, workspaceId: '', teamId: '' };
      const { id: taskId } = await newTask(fixture);
      const workspaces: string[] = [];
      for (let index = 0; index < 11; index += 1) workspaces.push(await createWorkspace(h, organization, token, uniqueName('free-ws')));
      const associations: string[] = [];
      for (const workspaceId of workspaces.slice(0, 10)) {
        associations.push(await newAssociation(fixture, workspaceId, taskId, { 'enforcement-level': 'advisory' }));
      }
      const eleventh = workspaces[10] ?? '';
      const error = expectError(await associate(token, eleventh, taskId, { 'enforcement-level': 'advisory' }), 422);
      expect(error.title).toBe('run task workspace limit reached');
      expect(error.detail).toMatch(/free edition/i);
      expect(error.detail).toContain('10 workspaces');
      expect((await api(h, 'get', `/workspaces/${eleventh}/tasks`, token)).body.data).toEqual([]);

      // An association on a workspace that already counts is no new workspace: updates still work.
      const update = await api(h, 'patch', `/workspaces/${workspaces[0]}/tasks/${associations[0]}`, token, {
        data: { type: 'workspace-tasks', attributes: { stages: ['pre_plan'] } },
      });
      expectStatus(update, 200);
      expectStatus(await api(h, 'delete', `/workspaces/${workspaces[0]}/tasks/${associations[0]}`, token), 204);
      expectStatus(await associate(token, eleventh, taskId, { 'enforcement-level': 'advisory' }), 201);
    });

    it('standard: unlimited run tasks and workspaces', async () => {
      const fixture = await seedOrganization(h, uniqueName('golden-standard'));
      const tasks = [await newTask(fixture), await newTask(fixture), await newTask(fixture)];
      for (let index = 0; index < 11; index += 1) {
        const workspaceId = await createWorkspace(h, fixture.organization, fixture.organizationToken, uniqueName('std-ws'));
        for (const task of tasks) await newAssociation(fixture, workspaceId, task.id, { 'enforcement-level': 'advisory' });
      }
      const list = await api(h, 'get', `/organizations/${fixture.organization}/tasks?include=workspace_tasks`, fixture.organizationToken);
      expectPagination(list, 3);
      expect(list.body.included).toHaveLength(33);
    });

    it('the entitlement set reports the limits: free 1 / 10 without global run tasks, standard unlimited with them', async () => {
      const free = await createOrganization(h, uniqueName('golden-ent-free'), { edition: 'free' });
      const freeToken = await createOrganizationToken(h, free);
      const freeSet = await api(h, 'get', `/organizations/${free}/entitlement-set`, freeToken);
      expectStatus(freeSet, 200);
      expect(freeSet.body.data.type).toBe('entitlement-sets');
      expect(freeSet.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': 1,
        'run-task-workspace-limit': 10,
        'global-run-tasks': false,
      });
      const standardSet = await api(h, 'get', `/organizations/${std.organization}/entitlement-set`, std.organizationToken);
      expectStatus(standardSet, 200);
      expect(standardSet.body.data.attributes).toMatchObject({
        'run-tasks': true,
        'run-task-limit': null,
        'run-task-workspace-limit': null,
        'global-run-tasks': true,
      });
    });
  });

  describe('task stages', () => {
    it('two workspace tasks on post_plan → one post_plan stage holding two results with workspace-task-id and task-name', async () => {
      const fixture = await seedOrganization(h, uniqueName('golden-two'));
      const alpha = await newTask(fixture);
      const beta = await newTask(fixture);
      const alphaAssociation = await newAssociation(fixture, fixture.workspaceId, alpha.id, { 'enforcement-level': 'mandatory' });
      const betaAssociation = await newAssociation(fixture, fixture.workspaceId, beta.id, {
        'enforcement-level': 'advisory',
        stage: 'post_plan',
      });
      const runId = await createRun(h, fixture.organizationToken, fixture.workspaceId);

      const res = await api(h, 'get', `/runs/${runId}/task-stages?include=task_results`, fixture.organizationToken);
      expectStatus(res, 200);
      expectPagination(res, 1);
      expect(res.body.data).toHaveLength(1);
      const resultIds = (res.body.data[0].relationships['task-results'].data as { id: string }[]).map((result) => result.id);
      expect(resultIds).toHaveLength(2);
      const stageId = expectTaskStage(res.body.data[0], { runId, stage: 'post_plan', status: 'pending', resultIds });
      const included = res.body.included as { id: string; attributes: { 'task-name': string } }[];
      expect(included.map((resource) => resource.id).sort()).toEqual([...resultIds].sort());
      const byName = new Map(included.map((resource) => [resource.attributes['task-name'], resource]));
      const common = { stageId, taskUrl: taskServer.url, stage: 'post_plan' as const };
      expectTaskResult(byName.get(alpha.name), {
        ...common,
        taskId: alpha.id,
        taskName: alpha.name,
        workspaceTaskId: alphaAssociation,
        enforcement: 'mandatory',
      });
      expectTaskResult(byName.get(beta.name), {
        ...common,
        taskId: beta.id,
        taskName: beta.name,
        workspaceTaskId: betaAssociation,
        enforcement: 'advisory',
      });
    });

    it('GET /runs/:id/task-stages without include (one statement) → the documents the list with include has, results in the same order', async () => {
      const fixture = await seedOrganization(h, uniqueName('golden-three'));
      for (let index = 0; index < 3; index += 1) {
        const task = await newTask(fixture);
        await newAssociation(fixture, fixture.workspaceId, task.id, { 'enforcement-level': 'advisory', stages: ['pre_plan', 'post_plan'] });
      }
      const runId = await createRun(h, fixture.organizationToken, fixture.workspaceId);
      const plain = await stagesOf(fixture, runId);
      const included = await api(h, 'get', `/runs/${runId}/task-stages?include=task_results`, fixture.organizationToken);
      expectStatus(included, 200);
      expect(plain.body.data).toEqual(included.body.data);
      const resultIds = (plain.body.data as { relationships: { 'task-results': { data: { id: string }[] } } }[]).map((stage) =>
        stage.relationships['task-results'].data.map((result) => result.id),
      );
      expect(resultIds.map((ids) => ids.length)).toEqual([3, 3]);
    });

    it('GET /runs/:id/task-stages: stages in lifecycle order pre_plan, post_plan, pre_apply, post_apply; paginated with meta', async () => {
      const { fixture, runId, stageIds, taskId, taskName, workspaceTaskId } = await runWithTask([
        'post_apply',
        'pre_apply',
        'post_plan',
        'pre_plan',
      ]);
      const res = await stagesOf(fixture, runId);
      expectPagination(res, 4);
      expect((res.body.data as { attributes: { stage: string } }[]).map((stage) => stage.attributes.stage)).toEqual([
        'pre_plan',
        'post_plan',
        'pre_apply',
        'post_apply',
      ]);
      for (const resource of res.body.data as { relationships: { 'task-results': { data: { id: string }[] } } }[]) {
        expect(resource.relationships['task-results'].data).toHaveLength(1);
      }
      const stages: Stage[] = ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'];
      (res.body.data as unknown[]).forEach((resource, index) => {
        const resultIds = (resource as { relationships: { 'task-results': { data: { id: string }[] } } }).relationships[
          'task-results'
        ].data.map((result) => result.id);
        const stage = stages[index] ?? 'pre_plan';
        expectTaskStage(resource, { runId, stage, ...asCreated(stage), resultIds });
      });
      // The run lists the same stages in the same order.
      const run = await api(h, 'get', `/runs/${runId}`, fixture.organizationToken);
      expect(run.body.data.relationships['task-stages'].data).toEqual(stageIds.map((id) => ({ id, type: 'task-stages' })));

      const second = await api(h, 'get', `/runs/${runId}/task-stages?page%5Bnumber%5D=2&page%5Bsize%5D=1`, fixture.organizationToken);
      expectStatus(second, 200);
      expectPagination(second, 4, 2, 1);
      expect((second.body.data as { id: string }[]).map((stage) => stage.id)).toEqual([stageIds[1]]);
      const beyond = await api(h, 'get', `/runs/${runId}/task-stages?page%5Bnumber%5D=3&page%5Bsize%5D=2`, fixture.organizationToken);
      expectStatus(beyond, 200);
      expect(beyond.body.data).toEqual([]);
      expect(beyond.body.meta.pagination).toMatchObject({ 'current-page': 3, 'total-count': 4, 'total-pages': 2, 'next-page': null });

      // Each result names its task and stage.
      const withResults = await api(h, 'get', `/runs/${runId}/task-stages?include=task-results`, fixture.organizationToken);
      const results = withResults.body.included as { attributes: { stage: string } }[];
      expect(results.map((result) => result.attributes.stage).sort()).toEqual([...stages].sort());
      for (const result of results) {
        const stage = (withResults.body.data as { id: string; attributes: { stage: string } }[]).find(
          (candidate) => candidate.attributes.stage === result.attributes.stage,
        );
        expectTaskResult(result, {
          stageId: stage?.id ?? '',
          taskId,
          taskName,
          taskUrl: taskServer.url,
          stage: result.attributes.stage as Stage,
          workspaceTaskId,
          enforcement: 'mandatory',
          ...asCreated(result.attributes.stage as Stage),
        });
      }
    });

    it('a plan-only run enters pre_plan and post_plan only, its results speculative', async () => {
      const fixture = await seedOrganization(h, uniqueName('golden-spec'));
      const task = await newTask(fixture);
      const workspaceTaskId = await newAssociation(fixture, fixture.workspaceId, task.id, {
        'enforcement-level': 'advisory',
        stages: ['pre_plan', 'post_plan', 'pre_apply', 'post_apply'],
      });
      const runId = await createRun(h, fixture.organizationToken, fixture.workspaceId, { 'plan-only': true });
      const res = await api(h, 'get', `/runs/${runId}/task-stages?include=task_results`, fixture.organizationToken);
      expectStatus(res, 200);
      expect((res.body.data as { attributes: { stage: string } }[]).map((stage) => stage.attributes.stage)).toEqual([
        'pre_plan',
        'post_plan',
      ]);
      for (const stage of res.body.data as { id: string; attributes: { stage: Stage } }[]) {
        const result = (res.body.included as { relationships: { 'task-stage': { data: { id: string } } } }[]).find(
          (candidate) => candidate.relationships['task-stage'].data.id === stage.id,
        );
        expectTaskResult(result, {
          stageId: stage.id,
          taskId: task.id,
          taskName: task.name,
          taskUrl: taskServer.url,
          stage: stage.attributes.stage,
          workspaceTaskId,
          enforcement: 'advisory',
          isSpeculative: true,
          ...asCreated(stage.attributes.stage),
        });
      }
    });

    describe('show and include', () => {
      let run: Awaited<ReturnType<typeof runWithTask>>;
      let resultIds: string[];
      let postPlanId: string;

      beforeAll(async () => {
        run = await runWithTask(['pre_plan', 'post_plan']);
        postPlanId = run.stageIds[1] ?? '';
        const stage = await api(h, 'get', `/task-stages/${postPlanId}`, run.fixture.organizationToken);
        resultIds = (stage.body.data.relationships['task-results'].data as { id: string }[]).map((result) => result.id);
      });

      it('show → 200 with the whole task-stages document; without include, results are ids only', async () => {
        const res = await api(h, 'get', `/task-stages/${postPlanId}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expect(Object.keys(res.body)).toEqual(['data']);
        expect(resultIds).toHaveLength(1);
        expect(resultIds[0]).toMatch(ID.taskResult);
        expectTaskStage(res.body.data, { runId: run.runId, stage: 'post_plan', status: 'pending', resultIds });
        expect(res.body.data.id).toBe(postPlanId);
      });

      it.each([
        'run,run.workspace,task_results,policy_evaluations',
        'run,run.workspace,task-results,policy-evaluations',
        'task_results,run.workspace',
      ])('show ?include=%s → the run, its workspace and the results as included documents', async (include) => {
        const res = await api(h, 'get', `/task-stages/${postPlanId}?include=${include}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expectTaskStage(res.body.data, { runId: run.runId, stage: 'post_plan', status: 'pending', resultIds });
        const included = res.body.included as { type: string; id: string }[];
        expect(included.map((resource) => `${resource.type}/${resource.id}`).sort()).toEqual(
          [`runs/${run.runId}`, `workspaces/${run.fixture.workspaceId}`, `task-results/${resultIds[0]}`].sort(),
        );
        // The included run is the run's own document (all of its task stages, not only this one).
        const ownRun = await api(h, 'get', `/runs/${run.runId}`, run.fixture.organizationToken);
        expect(included.find((resource) => resource.type === 'runs')).toEqual(ownRun.body.data);
        expectWorkspace(
          included.find((resource) => resource.type === 'workspaces'),
          run.fixture.workspaceId,
          `${run.fixture.organization}-ws`,
          run.fixture.organization,
        );
        expectTaskResult(
          included.find((resource) => resource.type === 'task-results'),
          {
            stageId: postPlanId,
            taskId: run.taskId,
            taskName: run.taskName,
            taskUrl: taskServer.url,
            stage: 'post_plan',
            workspaceTaskId: run.workspaceTaskId,
            enforcement: 'mandatory',
          },
        );
      });

      it.each(['run', 'policy_evaluations', 'policy-evaluations'])('show ?include=%s → only what was asked for', async (include) => {
        const res = await api(h, 'get', `/task-stages/${postPlanId}?include=${include}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        const types = ((res.body.included ?? []) as { type: string }[]).map((resource) => resource.type);
        expect(types).toEqual(include === 'run' ? ['runs'] : []);
      });

      it('list ?include=run,run.workspace → the run and workspace once, and the run equals its own document', async () => {
        const res = await api(h, 'get', `/runs/${run.runId}/task-stages?include=run,run.workspace`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expectPagination(res, 2);
        const included = res.body.included as { type: string; id: string }[];
        expect(included.map((resource) => `${resource.type}/${resource.id}`).sort()).toEqual(
          [`runs/${run.runId}`, `workspaces/${run.fixture.workspaceId}`].sort(),
        );
        const ownRun = await api(h, 'get', `/runs/${run.runId}`, run.fixture.organizationToken);
        expect(included.find((resource) => resource.type === 'runs')).toEqual(ownRun.body.data);
        // On a page holding one stage, the run still lists both of its stages.
        const paged = await api(h, 'get', `/runs/${run.runId}/task-stages?include=run&page%5Bsize%5D=1`, run.fixture.organizationToken);
        expectStatus(paged, 200);
        expectPagination(paged, 2, 1, 1);
        expect(paged.body.included).toEqual([ownRun.body.data]);
      });

      it.each(['tasks', 'workspace', 'run.plan', 'task_results.outcomes'])(
        'unknown ?include=%s → 400 naming the include parameter (show and list)',
        async (include) => {
          expectIncludeError(await api(h, 'get', `/task-stages/${postPlanId}?include=${include}`, run.fixture.organizationToken));
          expectIncludeError(await api(h, 'get', `/runs/${run.runId}/task-stages?include=${include}`, run.fixture.organizationToken));
        },
      );
    });
  });

  describe('task results and outcomes', () => {
    let run: Awaited<ReturnType<typeof runWithTask>>;
    let resultId: string;
    let outcomeIds: string[];
    const tags = { Severity: [{ label: 'High', level: 'error' }], Status: [{ label: 'Failed', level: 'error' }] };

    beforeAll(async () => {
      run = await runWithTask(['pre_apply'], 'advisory');
      const stage = await api(h, 'get', `/task-stages/${run.stageIds[0]}`, run.fixture.organizationToken);
      resultId = stage.body.data.relationships['task-results'].data[0].id as string;
      const em = h.orm.em.fork();
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
      const res = await api(h, 'get', `/task-results/${resultId}`, run.fixture.organizationToken);
      expectStatus(res, 200);
      expect(Object.keys(res.body)).toEqual(['data']);
      expectTaskResult(res.body.data, {
        stageId: run.stageIds[0] ?? '',
        taskId: run.taskId,
        taskName: run.taskName,
        taskUrl: taskServer.url,
        stage: 'pre_apply',
        workspaceTaskId: run.workspaceTaskId,
        enforcement: 'advisory',
      });
      expect(res.body.data.id).toBe(resultId);
    });

    it('outcomes list → 200 task-result-outcomes documents with meta.pagination', async () => {
      const res = await api(h, 'get', `/task-results/${resultId}/outcomes`, run.fixture.organizationToken);
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
        h,
        'get',
        `/task-results/${resultId}/outcomes?page%5Bsize%5D=1&page%5Bnumber%5D=2`,
        run.fixture.organizationToken,
      );
      expectStatus(paged, 200);
      expectPagination(paged, 2, 2, 1);
      expect(paged.body.data).toHaveLength(1);
    });

    it('outcome show → 200 with the same document as in the list', async () => {
      const list = await api(h, 'get', `/task-results/${resultId}/outcomes`, run.fixture.organizationToken);
      for (const id of outcomeIds) {
        const res = await api(h, 'get', `/task-result-outcomes/${id}`, run.fixture.organizationToken);
        expectStatus(res, 200);
        expect(Object.keys(res.body)).toEqual(['data']);
        expect(res.body.data.id).toMatch(ID.outcome);
        expect(res.body.data).toEqual((list.body.data as { id: string }[]).find((outcome) => outcome.id === id));
      }
    });

    it('a result without outcomes lists none', async () => {
      const other = await runWithTask(['post_plan']);
      const stage = await api(h, 'get', `/task-stages/${other.stageIds[0]}`, other.fixture.organizationToken);
      const otherResult = stage.body.data.relationships['task-results'].data[0].id as string;
      const res = await api(h, 'get', `/task-results/${otherResult}/outcomes`, other.fixture.organizationToken);
      expectStatus(res, 200);
      expect(res.body.data).toEqual([]);
      expectPagination(res, 0);
    });
  });

  describe('override', () => {
    /** Puts a stage in awaiting_override as the worker would, with its timestamp. */
    async function awaitOverride(stageId: string): Promise<string> {
      const at = new Date().toISOString();
      await h.orm.em
        .fork()
        .execute(
          `update task_stages set status = 'awaiting_override', status_timestamps = status_timestamps || ?::jsonb, updated_at = now() where id = ?`,
          [JSON.stringify({ 'awaiting-override-at': at }), stageId],
        );
      return at;
    }

    const override = (stageId: string, token: string, body: string) =>
      h.http
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
      const shown = await api(h, 'get', `/task-stages/${stageId}`, fixture.organizationToken);
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
      const stage = await api(h, 'get', `/task-stages/${stageId}`, fixture.organizationToken);
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
      const shown = await api(h, 'get', `/task-stages/${stageId}`, fixture.organizationToken);
      expect(shown.body.data.attributes['status-timestamps']).toEqual({ 'awaiting-override-at': awaitingAt, 'running-at': runningAt });
    });

    it("an override keeps the stage's running-at of when it first ran (timestamps are set once)", async () => {
      const { fixture, stageIds } = await runWithTask(['post_plan']);
      const stageId = stageIds[0] ?? '';
      const firstRanAt = '2026-01-02T03:04:05.000Z';
      await h.orm.em
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

    it('a team without manage-policy-overrides → 404; a team with it and run read access → 200', async () => {
      const { fixture, stageIds } = await runWithTask(['post_plan']);
      const stageId = stageIds[0] ?? '';
      await awaitOverride(stageId);

      const readers = await createTeam(h, fixture.organization, fixture.organizationToken, uniqueName('readers'));
      await grantWorkspace(h, fixture.organizationToken, readers, fixture.workspaceId, { access: 'read' });
      const readersToken = await createTeamToken(h, fixture.organizationToken, readers);
      const overridersElsewhere = await createTeam(h, fixture.organization, fixture.organizationToken, uniqueName('no-ws'), {
        'manage-policy-overrides': true,
      });
      const elsewhereToken = await createTeamToken(h, fixture.organizationToken, overridersElsewhere);
      const overriders = await createTeam(h, fixture.organization, fixture.organizationToken, uniqueName('overriders'), {
        'manage-policy-overrides': true,
      });
      await grantWorkspace(h, fixture.organizationToken, overriders, fixture.workspaceId, { access: 'read' });
      const overridersToken = await createTeamToken(h, fixture.organizationToken, overriders);

      // The reader sees the stage, says it cannot override, and gets the 404 of a missing stage.
      const seen = await api(h, 'get', `/task-stages/${stageId}`, readersToken);
      expectStatus(seen, 200);
      expect(seen.body.data.attributes.permissions).toEqual({
        'can-override-policy': false,
        'can-override-tasks': false,
        'can-override': false,
      });
      expect(seen.body.data.attributes.actions).toEqual({ 'is-overridable': false });
      const denied = await override(stageId, readersToken, '{}');
      expectNotFound(denied);
      expect(denied.body).toEqual(NOT_FOUND);
      // The permission without read access to the run's workspace is no better.
      expectNotFound(await override(stageId, elsewhereToken, '{}'));
      expect((await api(h, 'get', `/task-stages/${stageId}`, fixture.organizationToken)).body.data.attributes.status).toBe(
        'awaiting_override',
      );

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
