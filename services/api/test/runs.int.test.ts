import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId, RUN_STAGES, type EnforcementLevel, type RunStage, type RunStatus } from '@runtasks/shared/domain';
import { OutboxEvent, Run, RunTask, TaskResult, TaskStage, WorkspaceTask } from '@runtasks/shared/db';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
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
import { expectError, expectNotFound, uniqueName, type Response } from '../../../test/support/assertions.ts';

function expectTransitionNotAllowed(res: Response): void {
  expectError(res, 409);
  expect(res.body.errors[0].title).toBe('transition not allowed');
}

function runDocument(workspaceId: string, attributes: Record<string, unknown> = {}) {
  return { data: { type: 'runs', attributes, relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } } };
}

async function externalIdOf(h: Harness, organization: string): Promise<string> {
  const res = await api(h, 'get', `/organizations/${organization}`, h.adminToken);
  return res.body.data.attributes['external-id'] as string;
}

interface TaskOptions {
  enabled?: boolean;
  global?: { stages: RunStage[]; enforcementLevel: EnforcementLevel };
}

/** Run tasks have no API yet: they are created directly through the ORM. */
async function createRunTask(h: Harness, organizationId: string, name: string, options: TaskOptions = {}): Promise<string> {
  const em = h.orm.em.fork();
  const task = em.create(RunTask, {
    id: newId('task'),
    organization: organizationId,
    name,
    url: `https://tasks.example.test/${name}`,
    enabled: options.enabled ?? true,
    globalEnabled: options.global !== undefined,
    globalStages: options.global?.stages ?? [],
    globalEnforcementLevel: options.global?.enforcementLevel ?? 'advisory',
  });
  await em.flush();
  return task.id;
}

async function attachTask(
  h: Harness,
  workspaceId: string,
  taskId: string,
  stages: RunStage[],
  enforcementLevel: EnforcementLevel = 'advisory',
): Promise<string> {
  const em = h.orm.em.fork();
  const association = em.create(WorkspaceTask, {
    id: newId('workspaceTask'),
    workspace: workspaceId,
    task: taskId,
    enforcementLevel,
    stages,
  });
  await em.flush();
  return association.id;
}

async function stagesInDb(h: Harness, runId: string): Promise<TaskStage[]> {
  return h.orm.em.fork().find(TaskStage, { run: runId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

async function resultsInDb(h: Harness, runId: string): Promise<TaskResult[]> {
  return h.orm.em.fork().find(TaskResult, { taskStage: { run: runId } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

async function setRunStatus(h: Harness, runId: string, status: RunStatus): Promise<void> {
  expect(await h.orm.em.fork().nativeUpdate(Run, { id: runId }, { status })).toBe(1);
}

describe('runs API', () => {
  let h: Harness;
  let acme: Fixture;
  let other: Fixture;
  let readersTeamId: string;
  let readerToken: string;
  let plannerToken: string;
  let applierToken: string;
  let outsiderToken: string;
  let managerToken: string;

  beforeAll(async () => {
    h = await startHarness();
    acme = await seedOrganization(h, 'acme');
    other = await seedOrganization(h, 'other');
    const teamWith = async (
      name: string,
      access: Record<string, unknown> | null,
      organizationAccess: Record<string, boolean> = {},
    ): Promise<string> => {
      const teamId = await createTeam(h, acme.organization, acme.organizationToken, name, organizationAccess);
      if (access) await grantWorkspace(h, acme.organizationToken, teamId, acme.workspaceId, access);
      if (name === 'readers') readersTeamId = teamId;
      return createTeamToken(h, acme.organizationToken, teamId);
    };
    readerToken = await teamWith('readers', { access: 'read' });
    plannerToken = await teamWith('planners', { access: 'custom', runs: 'plan' });
    applierToken = await teamWith('appliers', { access: 'write' });
    outsiderToken = await teamWith('outsiders', null);
    managerToken = await teamWith('managers', null, { 'manage-workspaces': true });
  });
  afterAll(async () => {
    await h.close();
  });

  describe('POST /runs', () => {
    it('creates a pending run (201) with defaults', async () => {
      const res = await api(h, 'post', '/runs', acme.organizationToken, runDocument(acme.workspaceId));
      expect(res.status).toBe(201);
      expect(res.headers['content-type']).toContain(JSON_API);
      const run = res.body.data;
      expect(run.type).toBe('runs');
      expect(run.id).toMatch(/^run-[A-Za-z0-9]{16}$/);
      expect(run.attributes).toMatchObject({
        status: 'pending',
        message: 'Queued manually via the API',
        source: 'tfe-api',
        'is-destroy': false,
        'plan-only': false,
        'auto-apply': false,
        'has-changes': false,
        actions: { 'is-cancelable': true, 'is-confirmable': false, 'is-discardable': true, 'is-force-cancelable': false },
      });
      // An object (go-tfe decodes it into a struct): a run may be queued for planning from its creation.
      expect(run.attributes['status-timestamps']).toEqual({ 'plan-queueable-at': run.attributes['created-at'] });
      expect(run.relationships.workspace.data).toEqual({ type: 'workspaces', id: acme.workspaceId });
      expect(run.relationships.plan.data.id).toMatch(/^plan-/);
      expect(run.relationships['configuration-version'].data).toBeNull();
      expect(run.relationships['task-stages'].data).toEqual([]);
      expect(run.links.self).toBe(`/api/v2/runs/${run.id}`);
    });

    it('stores the given attributes and configuration version', async () => {
      // An uploaded configuration version of this workspace (written directly: the upload flow has its own tests).
      const cvId = `cv-${uniqueName('stored')
        .replace(/[^A-Za-z0-9]/g, '')
        .padEnd(16, '0')
        .slice(0, 16)}`;
      await h.orm.em.fork().execute(
        `insert into configuration_versions (id, workspace_id, status, status_timestamps, auto_queue_runs, speculative, created_at, updated_at)
           values (?, ?, 'uploaded', '{}', false, false, now(), now())`,
        [cvId, acme.workspaceId],
      );
      const res = await api(h, 'post', '/runs', acme.organizationToken, {
        data: {
          type: 'runs',
          attributes: { message: 'custom', 'plan-only': true, 'is-destroy': 'true', 'auto-apply': true, 'policy-paths': ['x'] },
          relationships: {
            workspace: { data: { type: 'workspaces', id: acme.workspaceId } },
            'configuration-version': { data: { type: 'configuration-versions', id: cvId } },
          },
        },
      });
      expect(res.status).toBe(201);
      expect(res.body.data.attributes).toMatchObject({ message: 'custom', 'plan-only': true, 'is-destroy': true, 'auto-apply': true });
      // An attribute this service does not know is ignored, as HCP ignores unknown attributes.
      expect(res.body.data.attributes).not.toHaveProperty('policy-paths');
      expect(res.body.data.attributes.actions['is-confirmable']).toBe(false);
      expect(res.body.data.relationships['configuration-version'].data).toEqual({ type: 'configuration-versions', id: cvId });
    });

    it("defaults auto-apply to the workspace's setting", async () => {
      const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, uniqueName('auto'));
      await api(h, 'patch', `/workspaces/${workspaceId}`, acme.organizationToken, {
        data: { type: 'workspaces', attributes: { 'auto-apply': true } },
      });
      const inherited = await api(h, 'post', '/runs', acme.organizationToken, runDocument(workspaceId));
      expect(inherited.body.data.attributes['auto-apply']).toBe(true);
      const overridden = await api(h, 'post', '/runs', acme.organizationToken, runDocument(workspaceId, { 'auto-apply': false }));
      expect(overridden.body.data.attributes['auto-apply']).toBe(false);
    });

    it('records a run.created outbox event in the same transaction, unpublished', async () => {
      const runId = await createRun(h, acme.organizationToken, acme.workspaceId);
      const events = await h.orm.em.fork().find(OutboxEvent, { aggregateId: runId });
      expect(events).toHaveLength(1);
      expect(events[0]!.topic).toBe('run.created');
      expect(events[0]!.payload).toEqual({ runId });
      expect(events[0]!.publishedAt).toBeNull();
    });

    it('lets the site admin, a managing team and teams with runs plan or apply create runs', async () => {
      for (const token of [h.adminToken, managerToken, plannerToken, applierToken]) {
        const res = await api(h, 'post', '/runs', token, runDocument(acme.workspaceId));
        expect(res.status).toBe(201);
        expect(res.body.data.attributes.status).toBe('pending');
      }
    });

    it('takes the apply permission to ask for auto-apply: 422 on the attribute for a team with runs plan, nothing created', async () => {
      const before = await h.orm.em.fork().count(Run, { workspace: acme.workspaceId });
      const refused = await api(h, 'post', '/runs', plannerToken, runDocument(acme.workspaceId, { 'auto-apply': true }));
      expectError(refused, 422, '/data/attributes/auto-apply');
      expect(await h.orm.em.fork().count(Run, { workspace: acme.workspaceId })).toBe(before);
      // Without it, or with it false, the same team queues runs; a team that may apply gets its auto-apply.
      for (const attributes of [{}, { 'auto-apply': false }]) {
        const queued = await api(h, 'post', '/runs', plannerToken, runDocument(acme.workspaceId, attributes));
        expect(queued.status).toBe(201);
        expect(queued.body.data.attributes['auto-apply']).toBe(false);
      }
      for (const token of [applierToken, managerToken, acme.organizationToken]) {
        const applying = await api(h, 'post', '/runs', token, runDocument(acme.workspaceId, { 'auto-apply': true }));
        expect(applying.status).toBe(201);
        expect(applying.body.data.attributes['auto-apply']).toBe(true);
      }
    });

    it('answers 404 to a team with runs read, a team without access and another organization', async () => {
      const before = await h.orm.em.fork().count(Run, { workspace: acme.workspaceId });
      for (const token of [readerToken, outsiderToken, other.organizationToken]) {
        expectNotFound(await api(h, 'post', '/runs', token, runDocument(acme.workspaceId)));
      }
      expectNotFound(await api(h, 'post', '/runs', acme.organizationToken, runDocument(other.workspaceId)));
      expectNotFound(await api(h, 'post', '/runs', h.adminToken, runDocument('ws-missing0000000000')));
      expect(await h.orm.em.fork().count(Run, { workspace: acme.workspaceId })).toBe(before);
    });

    it.each([
      ['a missing workspace relationship', { data: { type: 'runs', attributes: {}, relationships: {} } }, '/data/relationships/workspace'],
      [
        'a workspace relationship of the wrong type',
        { data: { type: 'runs', relationships: { workspace: { data: { type: 'teams', id: 'ws-x' } } } } },
        '/data/relationships/workspace/data/type',
      ],
      [
        'a non-boolean plan-only',
        {
          data: {
            type: 'runs',
            attributes: { 'plan-only': 'maybe' },
            relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } },
          },
        },
        '/data/attributes/plan-only',
      ],
      [
        'a numeric message',
        { data: { type: 'runs', attributes: { message: 7 }, relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } } } },
        '/data/attributes/message',
      ],
      [
        'a plan-json that is not an object',
        {
          data: {
            type: 'runs',
            attributes: { 'plan-json': [1, 2] },
            relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } },
          },
        },
        '/data/attributes/plan-json',
      ],
      [
        'a document of the wrong type',
        { data: { type: 'workspaces', relationships: { workspace: { data: { type: 'workspaces', id: 'ws-x' } } } } },
        '/data/type',
      ],
    ])('answers 422 with a pointer for %s', async (_label, document, pointer) => {
      expectError(await api(h, 'post', '/runs', acme.organizationToken, document), 422, pointer);
    });
  });

  describe('POST /runs without Redis', () => {
    let offline: Harness;
    beforeAll(async () => {
      // Nothing listens on port 1: any Redis call would fail or hang the request.
      offline = await startHarness({ env: { REDIS_URL: 'redis://127.0.0.1:1/0' } });
    });
    afterAll(async () => {
      await offline.close();
    });

    // With its operations the API would also publish the run's job at once, where Redis is there
    // (services/worker/test/outbox.int.test.ts); the run and its event never wait for it.
    it('creates runs with Redis unreachable: the run and its outbox event are in PostgreSQL', async () => {
      const organization = await createOrganization(offline, 'offline');
      const token = await createOrganizationToken(offline, organization);
      const workspaceId = await createWorkspace(offline, organization, token, 'offline-ws');
      const res = await api(offline, 'post', '/runs', token, runDocument(workspaceId));
      expect(res.status).toBe(201);
      expect(res.body.data.attributes.status).toBe('pending');
      expect(await offline.orm.em.fork().count(OutboxEvent, { aggregateId: res.body.data.id, publishedAt: null })).toBe(1);
    });
  });

  describe('task stages planned at run creation', () => {
    let org: Fixture;
    let orgId: string;
    beforeAll(async () => {
      org = await seedOrganization(h, 'planning');
      orgId = await externalIdOf(h, org.organization);
    });

    it('plans one post_plan stage with one result per workspace task, returned with include=task_stages', async () => {
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('two-tasks'));
      const first = await createRunTask(h, orgId, uniqueName('first'));
      const second = await createRunTask(h, orgId, uniqueName('second'));
      const firstAssociation = await attachTask(h, workspaceId, first, ['post_plan'], 'mandatory');
      const secondAssociation = await attachTask(h, workspaceId, second, ['post_plan']);

      const created = await api(h, 'post', '/runs', org.organizationToken, runDocument(workspaceId));
      expect(created.status).toBe(201);
      const runId = created.body.data.id as string;
      expect(created.body.data.relationships['task-stages'].data).toHaveLength(1);

      const res = await api(h, 'get', `/runs/${runId}?include=task_stages`, org.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.included).toHaveLength(1);
      const stage = res.body.included[0];
      expect(stage.type).toBe('task-stages');
      expect(stage.id).toBe(created.body.data.relationships['task-stages'].data[0].id);
      expect(stage.attributes).toMatchObject({ stage: 'post_plan', status: 'pending', 'status-timestamps': {} });
      expect(stage.relationships.run.data).toEqual({ type: 'runs', id: runId });
      expect(stage.relationships['task-results'].data).toHaveLength(2);
      expect(stage.attributes.permissions['can-override-tasks']).toBe(true);

      const results = await resultsInDb(h, runId);
      expect(results.map((result) => result.id).sort()).toEqual(
        stage.relationships['task-results'].data.map((r: { id: string }) => r.id).sort(),
      );
      expect(
        results.map((result) => [result.taskId, result.workspaceTaskId, result.enforcementLevel, result.stage, result.status]).sort(),
      ).toEqual(
        [
          [first, firstAssociation, 'mandatory', 'post_plan', 'pending'],
          [second, secondAssociation, 'advisory', 'post_plan', 'pending'],
        ].sort(),
      );
      expect(results.every((result) => !result.isSpeculative)).toBe(true);
      expect(results.map((result) => result.statusTimestamps)).toEqual([{}, {}]);
    });

    it('accepts the hyphenated include spelling and rejects unknown includes with 400', async () => {
      const runId = await createRun(h, org.organizationToken, org.workspaceId);
      const hyphen = await api(h, 'get', `/runs/${runId}?include=task-stages`, org.organizationToken);
      expect(hyphen.status).toBe(200);
      const bogus = await api(h, 'get', `/runs/${runId}?include=cost_estimate`, org.organizationToken);
      expectError(bogus, 400);
      expect(bogus.body.errors[0].source).toEqual({ parameter: 'include' });
    });

    it('plans every stage, in order, for a normal run but only pre_plan and post_plan for a plan-only run', async () => {
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('all-stages'));
      const task = await createRunTask(h, orgId, uniqueName('everywhere'));
      await attachTask(h, workspaceId, task, ['post_apply', 'pre_plan', 'pre_apply', 'post_plan']);

      const normal = await createRun(h, org.organizationToken, workspaceId);
      const normalShown = await api(h, 'get', `/runs/${normal}?include=task_stages`, org.organizationToken);
      expect(normalShown.body.included.map((stage: { attributes: { stage: string } }) => stage.attributes.stage)).toEqual([
        'pre_plan',
        'post_plan',
        'pre_apply',
        'post_apply',
      ]);
      expect(normalShown.body.data.relationships['task-stages'].data.map((s: { id: string }) => s.id)).toEqual(
        normalShown.body.included.map((s: { id: string }) => s.id),
      );

      const planOnly = await createRun(h, org.organizationToken, workspaceId, { 'plan-only': true });
      const stages = await stagesInDb(h, planOnly);
      expect(stages.map((stage) => stage.stage).sort()).toEqual(['post_plan', 'pre_plan']);
      const results = await resultsInDb(h, planOnly);
      expect(results).toHaveLength(2);
      expect(results.every((result) => result.isSpeculative)).toBe(true);
    });

    it('starts a run with pre_plan tasks in its pre_plan stage as it creates it, its results due for their first attempt', async () => {
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('pre-plan-start'));
      const task = await createRunTask(h, orgId, uniqueName('pre-plan'));
      await attachTask(h, workspaceId, task, ['pre_plan', 'post_plan']);

      const created = await api(h, 'post', '/runs', org.organizationToken, {
        data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } },
      });
      expect(created.status).toBe(201);
      const runId = created.body.data.id as string;
      const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(created.body.data.attributes).toMatchObject({
        status: 'pre_plan_running',
        'status-timestamps': { 'pre-plan-running-at': ISO },
      });
      const shown = (await api(h, 'get', `/runs/${runId}`, org.organizationToken)).body.data.attributes;
      expect(shown['status-timestamps']).toEqual(created.body.data.attributes['status-timestamps']);
      const run = await h.orm.em.fork().findOneOrFail(Run, { id: runId });
      expect({ status: run.status, version: run.version }).toEqual({ status: 'pre_plan_running', version: 2 });

      // As the worker's advance would have started them (version moved once, running-at), but unclaimed.
      const stages = (await stagesInDb(h, runId)).sort((a, b) => RUN_STAGES.indexOf(a.stage) - RUN_STAGES.indexOf(b.stage));
      expect(stages.map((stage) => [stage.stage, stage.status, stage.version, stage.statusTimestamps])).toEqual([
        ['pre_plan', 'running', 2, { 'running-at': ISO }],
        ['post_plan', 'pending', 1, {}],
      ]);
      const results = await resultsInDb(h, runId);
      const byStage = (stage: string) => results.filter((result) => result.stage === stage);
      const [started] = byStage('pre_plan');
      expect(started).toMatchObject({ status: 'running', version: 2, attempts: 0, statusTimestamps: { 'running-at': ISO } });
      const createdAt = run.createdAt.getTime();
      const seconds = (date: Date | null | undefined) => ((date?.getTime() ?? Number.NaN) - createdAt) / 1000;
      expect(seconds(started?.progressDeadline)).toBeCloseTo(h.config.taskProgressTimeoutSeconds, 0);
      expect(seconds(started?.hardDeadline)).toBeCloseTo(h.config.taskMaxRuntimeSeconds, 0);
      expect(seconds(started?.nextAttemptAt)).toBeCloseTo(0, 0);
      expect(byStage('post_plan')).toMatchObject([{ status: 'pending', version: 1, attempts: 0, statusTimestamps: {} }]);
      expect(byStage('post_plan')[0]?.progressDeadline ?? null).toBeNull();

      // Its run.created event names the started stage, whose results the worker claims and delivers.
      const [event] = await h.orm.em.fork().find(OutboxEvent, { aggregateId: runId });
      expect(event?.payload).toEqual({ runId, stageId: stages[0]?.id });

      // A run whose first step is planning (no pre_plan tasks) is left pending for the worker.
      const later = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('post-plan-only'));
      await attachTask(h, later, task, ['post_plan']);
      const pending = await createRun(h, org.organizationToken, later);
      expect((await h.orm.em.fork().findOneOrFail(Run, { id: pending })).status).toBe('pending');
      expect((await stagesInDb(h, pending)).map((stage) => stage.status)).toEqual(['pending']);
      const [pendingEvent] = await h.orm.em.fork().find(OutboxEvent, { aggregateId: pending });
      expect(pendingEvent?.payload).toEqual({ runId: pending });
    });

    it('gives a disabled task no result, and no stage when it is alone', async () => {
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('disabled'));
      const enabled = await createRunTask(h, orgId, uniqueName('on'));
      const disabled = await createRunTask(h, orgId, uniqueName('off'), { enabled: false });
      await attachTask(h, workspaceId, enabled, ['pre_plan']);
      await attachTask(h, workspaceId, disabled, ['pre_plan', 'post_plan']);
      const runId = await createRun(h, org.organizationToken, workspaceId);
      const stages = await stagesInDb(h, runId);
      expect(stages.map((stage) => stage.stage)).toEqual(['pre_plan']);
      const results = await resultsInDb(h, runId);
      expect(results.map((result) => result.taskId)).toEqual([enabled]);

      const onlyDisabled = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('only-disabled'));
      await attachTask(h, onlyDisabled, disabled, ['pre_plan']);
      const bare = await createRun(h, org.organizationToken, onlyDisabled);
      expect(await stagesInDb(h, bare)).toEqual([]);
      const shown = await api(h, 'get', `/runs/${bare}?include=task_stages`, org.organizationToken);
      expect(shown.body.data.relationships['task-stages'].data).toEqual([]);
      expect(shown.body).not.toHaveProperty('included');
    });

    it('applies a global task to every workspace of a standard organization', async () => {
      const standard = await seedOrganization(h, uniqueName('standard'));
      const standardId = await externalIdOf(h, standard.organization);
      const global = await createRunTask(h, standardId, 'global-task', {
        global: { stages: ['pre_plan', 'post_plan'], enforcementLevel: 'mandatory' },
      });
      const secondWorkspace = await createWorkspace(h, standard.organization, standard.organizationToken, 'second');
      for (const workspaceId of [standard.workspaceId, secondWorkspace]) {
        const runId = await createRun(h, standard.organizationToken, workspaceId);
        const stages = await stagesInDb(h, runId);
        expect(stages.map((stage) => stage.stage).sort()).toEqual(['post_plan', 'pre_plan']);
        const results = await resultsInDb(h, runId);
        expect(results).toHaveLength(2);
        for (const result of results) {
          expect(result.taskId).toBe(global);
          expect(result.workspaceTaskId).toBeNull();
          expect(result.enforcementLevel).toBe('mandatory');
        }
      }
      // Another organization's global task never reaches this one.
      const runElsewhere = await createRun(h, org.organizationToken, org.workspaceId);
      expect((await resultsInDb(h, runElsewhere)).map((result) => result.taskId)).not.toContain(global);
    });

    it('plans a global task that is also attached once, with the workspace settings', async () => {
      const standard = await seedOrganization(h, uniqueName('both'));
      const standardId = await externalIdOf(h, standard.organization);
      const global = await createRunTask(h, standardId, 'global-and-attached', {
        global: { stages: ['pre_plan'], enforcementLevel: 'advisory' },
      });
      const association = await attachTask(h, standard.workspaceId, global, ['pre_plan'], 'mandatory');
      const runId = await createRun(h, standard.organizationToken, standard.workspaceId);
      const results = await resultsInDb(h, runId);
      expect(results).toHaveLength(1);
      expect(results[0]!.workspaceTaskId).toBe(association);
      expect(results[0]!.enforcementLevel).toBe('mandatory');
    });

    it('does not apply global tasks in a free organization', async () => {
      const free = await createOrganization(h, uniqueName('free'), { edition: 'free' });
      const token = await createOrganizationToken(h, free);
      const freeId = await externalIdOf(h, free);
      const workspaceId = await createWorkspace(h, free, token, 'free-ws');
      const global = await createRunTask(h, freeId, 'global-task', { global: { stages: ['pre_plan'], enforcementLevel: 'mandatory' } });
      const runId = await createRun(h, token, workspaceId);
      expect(await stagesInDb(h, runId)).toEqual([]);
      // An attached task still runs in a free organization.
      await attachTask(h, workspaceId, global, ['post_plan']);
      const attachedRun = await createRun(h, token, workspaceId);
      expect((await stagesInDb(h, attachedRun)).map((stage) => stage.stage)).toEqual(['post_plan']);
    });

    it('tells a team without manage-policy-overrides that it cannot override tasks', async () => {
      const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('perm'));
      await attachTask(h, workspaceId, await createRunTask(h, orgId, uniqueName('perm-task')), ['pre_plan']);
      const runId = await createRun(h, org.organizationToken, workspaceId);
      const plain = await createTeam(h, org.organization, org.organizationToken, uniqueName('plain'));
      await grantWorkspace(h, org.organizationToken, plain, workspaceId, { access: 'read' });
      const overriders = await createTeam(h, org.organization, org.organizationToken, uniqueName('overriders'), {
        'manage-policy-overrides': true,
      });
      await grantWorkspace(h, org.organizationToken, overriders, workspaceId, { access: 'read' });

      const asPlain = await api(h, 'get', `/runs/${runId}?include=task_stages`, await createTeamToken(h, org.organizationToken, plain));
      expect(asPlain.status).toBe(200);
      expect(asPlain.body.included[0].attributes.permissions['can-override-tasks']).toBe(false);
      const asOverrider = await api(
        h,
        'get',
        `/runs/${runId}?include=task_stages`,
        await createTeamToken(h, org.organizationToken, overriders),
      );
      expect(asOverrider.body.included[0].attributes.permissions['can-override-tasks']).toBe(true);
    });
  });

  describe('GET /runs/:id', () => {
    let runId: string;
    beforeAll(async () => {
      runId = await createRun(h, acme.organizationToken, acme.workspaceId, { message: 'show me' });
    });

    it('shows a run to the owner, the admin and teams with any runs access', async () => {
      for (const token of [acme.organizationToken, h.adminToken, readerToken, plannerToken, managerToken]) {
        const res = await api(h, 'get', `/runs/${runId}`, token);
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toContain(JSON_API);
        expect(res.body.data.id).toBe(runId);
        expect(res.body.data.attributes.message).toBe('show me');
        expect(res.body).not.toHaveProperty('included');
      }
    });

    it('answers 404 to a team without access, another organization and for a missing run', async () => {
      expectNotFound(await api(h, 'get', `/runs/${runId}`, outsiderToken));
      expectNotFound(await api(h, 'get', `/runs/${runId}`, other.organizationToken));
      expectNotFound(await api(h, 'get', '/runs/run-missing000000000', h.adminToken));
    });
  });

  describe('GET /workspaces/:id/runs', () => {
    let workspaceId: string;
    let runs: string[];
    beforeAll(async () => {
      workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, 'listed-runs');
      await grantWorkspace(h, acme.organizationToken, readersTeamId, workspaceId, { access: 'read' });
      runs = [];
      for (let i = 0; i < 5; i += 1) runs.push(await createRun(h, acme.organizationToken, workspaceId, { message: `run ${i}` }));
      // Runs created within the same millisecond would tie; space them out so "newest first" is unambiguous.
      const em = h.orm.em.fork();
      const base = Date.now() - 60_000;
      for (const [i, id] of runs.entries()) await em.nativeUpdate(Run, { id }, { createdAt: new Date(base + i * 1000) });
    });

    it('lists the runs of a workspace newest first, with pagination meta', async () => {
      const res = await api(h, 'get', `/workspaces/${workspaceId}/runs`, acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toContain(JSON_API);
      expect(res.body.data.map((run: { id: string }) => run.id)).toEqual([...runs].reverse());
      expect(res.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 20,
        'prev-page': null,
        'next-page': null,
        'total-pages': 1,
        'total-count': 5,
      });
    });

    it('paginates', async () => {
      const first = await api(h, 'get', `/workspaces/${workspaceId}/runs?page[size]=2`, acme.organizationToken);
      expect(first.body.data.map((run: { id: string }) => run.id)).toEqual([runs[4], runs[3]]);
      expect(first.body.meta.pagination).toEqual({
        'current-page': 1,
        'page-size': 2,
        'prev-page': null,
        'next-page': 2,
        'total-pages': 3,
        'total-count': 5,
      });
      expect(first.body.links.next).toBe(`http://runtasks.test/api/v2/workspaces/${workspaceId}/runs?page%5Bsize%5D=2&page%5Bnumber%5D=2`);
      expect(first.body.links.prev).toBeNull();

      const last = await api(h, 'get', `/workspaces/${workspaceId}/runs?page[size]=2&page[number]=3`, acme.organizationToken);
      expect(last.body.data.map((run: { id: string }) => run.id)).toEqual([runs[0]]);
      expect(last.body.meta.pagination).toMatchObject({ 'current-page': 3, 'prev-page': 2, 'next-page': null });

      const beyond = await api(h, 'get', `/workspaces/${workspaceId}/runs?page[size]=2&page[number]=9`, acme.organizationToken);
      expect(beyond.status).toBe(200);
      expect(beyond.body.data).toEqual([]);

      const invalid = await api(h, 'get', `/workspaces/${workspaceId}/runs?page[size]=1000`, acme.organizationToken);
      expectError(invalid, 422);
      expect(invalid.body.errors[0].source).toEqual({ parameter: 'page[size]' });
    });

    it('includes task stages when asked', async () => {
      const planning = await seedOrganization(h, uniqueName('list-stages'));
      const task = await createRunTask(h, await externalIdOf(h, planning.organization), 'listed-task');
      await attachTask(h, planning.workspaceId, task, ['pre_plan']);
      const a = await createRun(h, planning.organizationToken, planning.workspaceId);
      const b = await createRun(h, planning.organizationToken, planning.workspaceId);
      const res = await api(h, 'get', `/workspaces/${planning.workspaceId}/runs?include=task_stages`, planning.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.included).toHaveLength(2);
      expect(
        res.body.included.map((stage: { relationships: { run: { data: { id: string } } } }) => stage.relationships.run.data.id).sort(),
      ).toEqual([a, b].sort());
      // Each stage with its own run's result (all read in one query, then grouped by stage).
      for (const runId of [a, b]) {
        const stage = res.body.included.find(
          (included: { relationships: { run: { data: { id: string } } } }) => included.relationships.run.data.id === runId,
        );
        expect(stage.relationships['task-results'].data).toEqual(
          (await resultsInDb(h, runId)).map((result) => ({ type: 'task-results', id: result.id })),
        );
      }
    });

    it('lists runs to a team with read access, 404 to a team without and to another organization', async () => {
      const res = await api(h, 'get', `/workspaces/${workspaceId}/runs`, readerToken);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(5);
      expectNotFound(await api(h, 'get', `/workspaces/${workspaceId}/runs`, outsiderToken));
      expectNotFound(await api(h, 'get', `/workspaces/${workspaceId}/runs`, other.organizationToken));
      expectNotFound(await api(h, 'get', '/workspaces/ws-missing0000000000/runs', h.adminToken));
    });

    it('does not list runs of other workspaces', async () => {
      const res = await api(h, 'get', `/workspaces/${acme.workspaceId}/runs?page[size]=100`, acme.organizationToken);
      const ids = res.body.data.map((run: { id: string }) => run.id);
      for (const id of runs) expect(ids).not.toContain(id);
    });
  });

  describe('run actions', () => {
    let org: Fixture;
    let orgId: string;
    let workspaceId: string;
    beforeAll(async () => {
      org = await seedOrganization(h, 'actions');
      orgId = await externalIdOf(h, org.organization);
      workspaceId = await createWorkspace(h, org.organization, org.organizationToken, 'with-tasks');
      const first = await createRunTask(h, orgId, 'first');
      const second = await createRunTask(h, orgId, 'second');
      // No pre_plan tasks: a run with some would start its pre_plan stage as it is created, never pending.
      await attachTask(h, workspaceId, first, ['post_plan', 'pre_apply']);
      await attachTask(h, workspaceId, second, ['post_plan']);
    });

    const runWithTasks = () => createRun(h, org.organizationToken, workspaceId);
    const show = async (runId: string) => (await api(h, 'get', `/runs/${runId}?include=task_stages`, org.organizationToken)).body;

    it('answers 409 "transition not allowed" to apply on a pending run, which stays pending', async () => {
      const runId = await runWithTasks();
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken));
      expect((await show(runId)).data.attributes.status).toBe('pending');
    });

    it('cancels a pending run (202), canceling its stages and results', async () => {
      const runId = await runWithTasks();
      expect((await stagesInDb(h, runId)).map((stage) => stage.status)).toEqual(['pending', 'pending']);
      const res = await api(h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken, { comment: 'stop' });
      expect(res.status).toBe(202);
      expect(res.text).toBe('');
      expect(res.headers['content-type']).toBeUndefined();

      const body = await show(runId);
      expect(body.data.attributes.status).toBe('canceled');
      expect(body.data.attributes['status-timestamps']).toEqual({
        'plan-queueable-at': body.data.attributes['created-at'],
        'canceled-at': expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });
      expect(body.data.attributes.actions).toMatchObject({ 'is-cancelable': false, 'is-confirmable': false, 'is-discardable': false });
      expect(body.included).toHaveLength(2);
      for (const stage of body.included) {
        expect(stage.attributes.status).toBe('canceled');
        expect(stage.attributes['status-timestamps']).toEqual({ 'canceled-at': expect.any(String) });
      }
      const results = await resultsInDb(h, runId);
      expect(results).toHaveLength(3);
      expect(results.map((result) => result.status)).toEqual(['canceled', 'canceled', 'canceled']);
      expect(results.map((result) => result.statusTimestamps)).toEqual([0, 1, 2].map(() => ({ 'canceled-at': expect.any(String) })));

      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken));
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken));
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken));
    });

    it('discards a pending run (202), canceling its stages and results', async () => {
      const runId = await runWithTasks();
      const res = await api(h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken);
      expect(res.status).toBe(202);
      expect(res.text).toBe('');
      const body = await show(runId);
      expect(body.data.attributes.status).toBe('discarded');
      expect(body.data.attributes['status-timestamps']).toEqual({
        'plan-queueable-at': body.data.attributes['created-at'],
        'discarded-at': expect.any(String),
      });
      expect(body.included.map((stage: { attributes: { status: string } }) => stage.attributes.status)).toEqual(['canceled', 'canceled']);
      expect((await resultsInDb(h, runId)).every((result) => result.status === 'canceled')).toBe(true);
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken));
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken));
    });

    /** A run with its post_plan stage and that stage's results in `postPlan`, and the run in `status`. */
    async function runWithPostPlan(postPlan: 'running' | 'passed', status: RunStatus): Promise<string> {
      const runId = await runWithTasks();
      const em = h.orm.em.fork();
      const stage = (await stagesInDb(h, runId)).find((candidate) => candidate.stage === 'post_plan')!;
      await em.nativeUpdate(TaskStage, { id: stage.id }, { status: postPlan });
      await em.nativeUpdate(TaskResult, { taskStage: stage.id }, { status: postPlan });
      await setRunStatus(h, runId, status);
      return runId;
    }

    it("discards a run whose post_plan tasks are running (202; HCP's discardable group), canceling what is open", async () => {
      const runId = await runWithPostPlan('running', 'post_plan_running');
      expect((await show(runId)).data.attributes.actions).toMatchObject({ 'is-cancelable': true, 'is-discardable': true });

      expect((await api(h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken)).status).toBe(202);
      expect((await show(runId)).data.attributes.status).toBe('discarded');
      expect(Object.fromEntries((await stagesInDb(h, runId)).map((stage) => [stage.stage, stage.status]))).toEqual({
        post_plan: 'canceled',
        pre_apply: 'canceled',
      });
      expect((await resultsInDb(h, runId)).every((result) => result.status === 'canceled')).toBe(true);
    });

    it('leaves finished stages and results alone when canceling', async () => {
      const runId = await runWithPostPlan('passed', 'confirmed');

      expect((await api(h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken)).status).toBe(202);
      const stages = await stagesInDb(h, runId);
      expect(Object.fromEntries(stages.map((stage) => [stage.stage, stage.status]))).toEqual({
        post_plan: 'passed',
        pre_apply: 'canceled',
      });
      const results = await resultsInDb(h, runId);
      expect(results.filter((result) => result.stage === 'post_plan').map((result) => result.status)).toEqual(['passed', 'passed']);
      expect(results.filter((result) => result.stage === 'pre_apply').map((result) => result.status)).toEqual(['canceled']);
    });

    it('applies a planned run (202 → confirmed), but not a plan-only one', async () => {
      const runId = await runWithTasks();
      await setRunStatus(h, runId, 'post_plan_completed');
      const before = await show(runId);
      expect(before.data.attributes.actions['is-confirmable']).toBe(true);
      const res = await api(h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken, { comment: 'ship it' });
      expect(res.status).toBe(202);
      const after = await show(runId);
      expect(after.data.attributes.status).toBe('confirmed');
      expect(after.data.attributes['status-timestamps']).toEqual({
        'plan-queueable-at': after.data.attributes['created-at'],
        'confirmed-at': expect.any(String),
      });
      // Apply leaves the stages to the worker.
      expect(after.included.map((stage: { attributes: { status: string } }) => stage.attributes.status)).toEqual(['pending', 'pending']);
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/apply`, org.organizationToken));
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${runId}/actions/discard`, org.organizationToken));

      const planOnly = await createRun(h, org.organizationToken, workspaceId, { 'plan-only': true });
      await setRunStatus(h, planOnly, 'planned');
      expectTransitionNotAllowed(await api(h, 'post', `/runs/${planOnly}/actions/apply`, org.organizationToken));
      expect((await show(planOnly)).data.attributes.status).toBe('planned');
      expect((await api(h, 'post', `/runs/${planOnly}/actions/discard`, org.organizationToken)).status).toBe(202);
    });

    it('answers 422 with a pointer for a wrongly typed comment', async () => {
      const runId = await runWithTasks();
      expectError(await api(h, 'post', `/runs/${runId}/actions/cancel`, org.organizationToken, { comment: 5 }), 422, '/comment');
      expect((await show(runId)).data.attributes.status).toBe('pending');
    });

    describe('permissions', () => {
      it('answers 404 to a team with runs plan or read, leaving the run untouched', async () => {
        for (const token of [plannerToken, readerToken]) {
          const runId = await createRun(h, acme.organizationToken, acme.workspaceId);
          expectNotFound(await api(h, 'post', `/runs/${runId}/actions/cancel`, token));
          expectNotFound(await api(h, 'post', `/runs/${runId}/actions/discard`, token));
          expectNotFound(await api(h, 'post', `/runs/${runId}/actions/apply`, token));
          expect((await api(h, 'get', `/runs/${runId}`, acme.organizationToken)).body.data.attributes.status).toBe('pending');
        }
      });

      it('lets a team with runs apply cancel and discard', async () => {
        const toCancel = await createRun(h, acme.organizationToken, acme.workspaceId);
        expect((await api(h, 'post', `/runs/${toCancel}/actions/cancel`, applierToken)).status).toBe(202);
        expect((await api(h, 'get', `/runs/${toCancel}`, acme.organizationToken)).body.data.attributes.status).toBe('canceled');
        const toDiscard = await createRun(h, acme.organizationToken, acme.workspaceId);
        expect((await api(h, 'post', `/runs/${toDiscard}/actions/discard`, managerToken)).status).toBe(202);
        expect((await api(h, 'get', `/runs/${toDiscard}`, acme.organizationToken)).body.data.attributes.status).toBe('discarded');
      });

      it("answers 404 for another organization's run, a team without access and a missing run", async () => {
        const runId = await createRun(h, acme.organizationToken, acme.workspaceId);
        for (const action of ['apply', 'cancel', 'discard']) {
          expectNotFound(await api(h, 'post', `/runs/${runId}/actions/${action}`, other.organizationToken));
          expectNotFound(await api(h, 'post', `/runs/${runId}/actions/${action}`, outsiderToken));
          expectNotFound(await api(h, 'post', `/runs/run-missing000000000/actions/${action}`, h.adminToken));
        }
        expect((await api(h, 'get', `/runs/${runId}`, acme.organizationToken)).body.data.attributes.status).toBe('pending');
      });
    });
  });

  describe('plan JSON', () => {
    const planJson = {
      format_version: '1.2',
      terraform_version: '1.8.0',
      resource_changes: [{ address: 'null_resource.a', change: { actions: ['create'] } }],
      planned_values: { root_module: { resources: [] } },
    };
    let withPlan: { runId: string; planId: string };
    let withoutPlan: { runId: string; planId: string };
    beforeAll(async () => {
      const a = await api(h, 'post', '/runs', acme.organizationToken, runDocument(acme.workspaceId, { 'plan-json': planJson }));
      withPlan = { runId: a.body.data.id, planId: a.body.data.relationships.plan.data.id };
      const workspaceId = await createWorkspace(h, acme.organization, acme.organizationToken, 'versioned');
      await api(h, 'patch', `/workspaces/${workspaceId}`, acme.organizationToken, {
        data: { type: 'workspaces', attributes: { 'terraform-version': '1.7.5' } },
      });
      await grantWorkspace(h, acme.organizationToken, readersTeamId, workspaceId, { access: 'read' });
      const b = await api(h, 'post', '/runs', acme.organizationToken, runDocument(workspaceId));
      withoutPlan = { runId: b.body.data.id, planId: b.body.data.relationships.plan.data.id };
    });

    it('serves the caller-supplied plan JSON at /plans/:plan_id/json-output', async () => {
      const res = await api(h, 'get', `/plans/${withPlan.planId}/json-output`, acme.organizationToken);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toEqual(planJson);
    });

    it('serves a minimal plan document when none was supplied', async () => {
      const res = await api(h, 'get', `/plans/${withoutPlan.planId}/json-output`, readerToken);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        format_version: '1.2',
        terraform_version: '1.7.5',
        planned_values: { root_module: {} },
        resource_changes: [],
        configuration: { root_module: {} },
      });
    });

    it('serves the same document at /runs/:run_id/plan/json-output', async () => {
      const byRun = await api(h, 'get', `/runs/${withPlan.runId}/plan/json-output`, acme.organizationToken);
      expect(byRun.status).toBe(200);
      expect(byRun.body).toEqual(planJson);
      const minimal = await api(h, 'get', `/runs/${withoutPlan.runId}/plan/json-output`, acme.organizationToken);
      expect(minimal.body.terraform_version).toBe('1.7.5');
    });

    it('answers 404 to another organization, a team without access, and for unknown ids', async () => {
      expectNotFound(await api(h, 'get', `/plans/${withPlan.planId}/json-output`, other.organizationToken));
      expectNotFound(await api(h, 'get', `/plans/${withPlan.planId}/json-output`, outsiderToken));
      expectNotFound(await api(h, 'get', `/runs/${withPlan.runId}/plan/json-output`, other.organizationToken));
      expectNotFound(await api(h, 'get', '/plans/plan-missing00000000/json-output', h.adminToken));
      // A run id is not a plan id.
      expectNotFound(await api(h, 'get', `/plans/${withPlan.runId}/json-output`, h.adminToken));
    });

    it('answers 401 without a token', async () => {
      const res = await api(h, 'get', `/plans/${withPlan.planId}/json-output`);
      expect(res.status).toBe(401);
    });
  });
});
