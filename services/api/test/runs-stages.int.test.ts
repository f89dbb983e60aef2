import { beforeAll, describe, expect, it } from '@jest/globals';
import { RUN_STAGES } from '@runtasks/shared/domain';
import { OutboxEvent, Run } from '@runtasks/shared/db';
import {
  api,
  createOrganization,
  createOrganizationToken,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../test/support/fixtures.ts';
import { expectError, uniqueName } from '../../../test/support/assertions.ts';
import { attachTask, createRunTask, externalIdOf, resultsInDb, runDocument, stagesInDb } from './runs/helpers.ts';
import { useRunsApi } from './runs/setup.ts';

describe('runs API', () => {
  const g = useRunsApi();

  describe('task stages planned at run creation', () => {
    let org: Fixture;
    let orgId: string;
    beforeAll(async () => {
      org = await seedOrganization(g.h, 'planning');
      orgId = await externalIdOf(g.h, org.organization);
    });

    it('plans one post_plan stage with one result per workspace task, returned with include=task_stages', async () => {
      const workspaceId = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('two-tasks'));
      const first = await createRunTask(g.h, orgId, uniqueName('first'));
      const second = await createRunTask(g.h, orgId, uniqueName('second'));
      const firstAssociation = await attachTask(g.h, workspaceId, first, ['post_plan'], 'mandatory');
      const secondAssociation = await attachTask(g.h, workspaceId, second, ['post_plan']);

      const created = await api(g.h, 'post', '/runs', org.organizationToken, runDocument(workspaceId));
      expect(created.status).toBe(201);
      const runId = created.body.data.id as string;
      expect(created.body.data.relationships['task-stages'].data).toHaveLength(1);

      const res = await api(g.h, 'get', `/runs/${runId}?include=task_stages`, org.organizationToken);
      expect(res.status).toBe(200);
      expect(res.body.included).toHaveLength(1);
      const stage = res.body.included[0];
      expect(stage.type).toBe('task-stages');
      expect(stage.id).toBe(created.body.data.relationships['task-stages'].data[0].id);
      expect(stage.attributes).toMatchObject({ stage: 'post_plan', status: 'pending', 'status-timestamps': {} });
      expect(stage.relationships.run.data).toEqual({ type: 'runs', id: runId });
      expect(stage.relationships['task-results'].data).toHaveLength(2);
      expect(stage.attributes.permissions['can-override-tasks']).toBe(true);

      const results = await resultsInDb(g.h, runId);
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
      const runId = await createRun(g.h, org.organizationToken, org.workspaceId);
      const hyphen = await api(g.h, 'get', `/runs/${runId}?include=task-stages`, org.organizationToken);
      expect(hyphen.status).toBe(200);
      const bogus = await api(g.h, 'get', `/runs/${runId}?include=cost_estimate`, org.organizationToken);
      expectError(bogus, 400);
      expect(bogus.body.errors[0].source).toEqual({ parameter: 'include' });
    });

    it('plans every stage, in order, for a normal run but only pre_plan and post_plan for a plan-only run', async () => {
      const workspaceId = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('all-stages'));
      const task = await createRunTask(g.h, orgId, uniqueName('everywhere'));
      await attachTask(g.h, workspaceId, task, ['post_apply', 'pre_plan', 'pre_apply', 'post_plan']);

      const normal = await createRun(g.h, org.organizationToken, workspaceId);
      const normalShown = await api(g.h, 'get', `/runs/${normal}?include=task_stages`, org.organizationToken);
      expect(normalShown.body.included.map((stage: { attributes: { stage: string } }) => stage.attributes.stage)).toEqual([
        'pre_plan',
        'post_plan',
        'pre_apply',
        'post_apply',
      ]);
      expect(normalShown.body.data.relationships['task-stages'].data.map((s: { id: string }) => s.id)).toEqual(
        normalShown.body.included.map((s: { id: string }) => s.id),
      );

      const planOnly = await createRun(g.h, org.organizationToken, workspaceId, { 'plan-only': true });
      const stages = await stagesInDb(g.h, planOnly);
      expect(stages.map((stage) => stage.stage).sort()).toEqual(['post_plan', 'pre_plan']);
      const results = await resultsInDb(g.h, planOnly);
      expect(results).toHaveLength(2);
      expect(results.every((result) => result.isSpeculative)).toBe(true);
    });

    it('starts a run with pre_plan tasks in its pre_plan stage as it creates it, its results due for their first attempt', async () => {
      const workspaceId = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('pre-plan-start'));
      const task = await createRunTask(g.h, orgId, uniqueName('pre-plan'));
      await attachTask(g.h, workspaceId, task, ['pre_plan', 'post_plan']);

      const created = await api(g.h, 'post', '/runs', org.organizationToken, {
        data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } },
      });
      expect(created.status).toBe(201);
      const runId = created.body.data.id as string;
      const ISO = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(created.body.data.attributes).toMatchObject({
        status: 'pre_plan_running',
        'status-timestamps': { 'pre-plan-running-at': ISO },
      });
      const shown = (await api(g.h, 'get', `/runs/${runId}`, org.organizationToken)).body.data.attributes;
      expect(shown['status-timestamps']).toEqual(created.body.data.attributes['status-timestamps']);
      const run = await g.h.orm.em.fork().findOneOrFail(Run, { id: runId });
      expect({ status: run.status, version: run.version }).toEqual({ status: 'pre_plan_running', version: 2 });

      // As the worker's advance would have started them (version moved once, running-at), but unclaimed.
      const stages = (await stagesInDb(g.h, runId)).sort((a, b) => RUN_STAGES.indexOf(a.stage) - RUN_STAGES.indexOf(b.stage));
      expect(stages.map((stage) => [stage.stage, stage.status, stage.version, stage.statusTimestamps])).toEqual([
        ['pre_plan', 'running', 2, { 'running-at': ISO }],
        ['post_plan', 'pending', 1, {}],
      ]);
      const results = await resultsInDb(g.h, runId);
      const byStage = (stage: string) => results.filter((result) => result.stage === stage);
      const [started] = byStage('pre_plan');
      expect(started).toMatchObject({ status: 'running', version: 2, attempts: 0, statusTimestamps: { 'running-at': ISO } });
      const createdAt = run.createdAt.getTime();
      const seconds = (date: Date | null | undefined) => ((date?.getTime() ?? Number.NaN) - createdAt) / 1000;
      expect(seconds(started?.progressDeadline)).toBeCloseTo(g.h.config.taskProgressTimeoutSeconds, 0);
      expect(seconds(started?.hardDeadline)).toBeCloseTo(g.h.config.taskMaxRuntimeSeconds, 0);
      expect(seconds(started?.nextAttemptAt)).toBeCloseTo(0, 0);
      expect(byStage('post_plan')).toMatchObject([{ status: 'pending', version: 1, attempts: 0, statusTimestamps: {} }]);
      expect(byStage('post_plan')[0]?.progressDeadline ?? null).toBeNull();

      // Its run.created event names the started stage, whose results the worker claims and delivers.
      const [event] = await g.h.orm.em.fork().find(OutboxEvent, { aggregateId: runId });
      expect(event?.payload).toEqual({ runId, stageId: stages[0]?.id });

      // A run whose first step is planning (no pre_plan tasks) is left pending for the worker.
      const later = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('post-plan-only'));
      await attachTask(g.h, later, task, ['post_plan']);
      const pending = await createRun(g.h, org.organizationToken, later);
      expect((await g.h.orm.em.fork().findOneOrFail(Run, { id: pending })).status).toBe('pending');
      expect((await stagesInDb(g.h, pending)).map((stage) => stage.status)).toEqual(['pending']);
      const [pendingEvent] = await g.h.orm.em.fork().find(OutboxEvent, { aggregateId: pending });
      expect(pendingEvent?.payload).toEqual({ runId: pending });
    });

    it('gives a disabled task no result, and no stage when it is alone', async () => {
      const workspaceId = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('disabled'));
      const enabled = await createRunTask(g.h, orgId, uniqueName('on'));
      const disabled = await createRunTask(g.h, orgId, uniqueName('off'), { enabled: false });
      await attachTask(g.h, workspaceId, enabled, ['pre_plan']);
      await attachTask(g.h, workspaceId, disabled, ['pre_plan', 'post_plan']);
      const runId = await createRun(g.h, org.organizationToken, workspaceId);
      const stages = await stagesInDb(g.h, runId);
      expect(stages.map((stage) => stage.stage)).toEqual(['pre_plan']);
      const results = await resultsInDb(g.h, runId);
      expect(results.map((result) => result.taskId)).toEqual([enabled]);

      const onlyDisabled = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('only-disabled'));
      await attachTask(g.h, onlyDisabled, disabled, ['pre_plan']);
      const bare = await createRun(g.h, org.organizationToken, onlyDisabled);
      expect(await stagesInDb(g.h, bare)).toEqual([]);
      const shown = await api(g.h, 'get', `/runs/${bare}?include=task_stages`, org.organizationToken);
      expect(shown.body.data.relationships['task-stages'].data).toEqual([]);
      expect(shown.body).not.toHaveProperty('included');
    });

    it('applies a global task to every workspace of a standard organization', async () => {
      const standard = await seedOrganization(g.h, uniqueName('standard'));
      const standardId = await externalIdOf(g.h, standard.organization);
      const global = await createRunTask(g.h, standardId, 'global-task', {
        global: { stages: ['pre_plan', 'post_plan'], enforcementLevel: 'mandatory' },
      });
      const secondWorkspace = await createWorkspace(g.h, standard.organization, standard.organizationToken, 'second');
      for (const workspaceId of [standard.workspaceId, secondWorkspace]) {
        const runId = await createRun(g.h, standard.organizationToken, workspaceId);
        const stages = await stagesInDb(g.h, runId);
        expect(stages.map((stage) => stage.stage).sort()).toEqual(['post_plan', 'pre_plan']);
        const results = await resultsInDb(g.h, runId);
        expect(results).toHaveLength(2);
        for (const result of results) {
          expect(result.taskId).toBe(global);
          expect(result.workspaceTaskId).toBeNull();
          expect(result.enforcementLevel).toBe('mandatory');
        }
      }
      // Another organization's global task never reaches this one.
      const runElsewhere = await createRun(g.h, org.organizationToken, org.workspaceId);
      expect((await resultsInDb(g.h, runElsewhere)).map((result) => result.taskId)).not.toContain(global);
    });

    it('does not plan a task whose global configuration was switched off into new runs', async () => {
      const standard = await seedOrganization(g.h, uniqueName('global-off'));
      const standardId = await externalIdOf(g.h, standard.organization);
      const kept = await createRunTask(g.h, standardId, 'kept-global', { global: { stages: ['pre_plan'], enforcementLevel: 'mandatory' } });
      const switched = await createRunTask(g.h, standardId, 'switched-global', {
        global: { stages: ['post_plan'], enforcementLevel: 'mandatory' },
      });
      const before = await createRun(g.h, standard.organizationToken, standard.workspaceId);
      expect((await resultsInDb(g.h, before)).map((result) => result.taskId).sort()).toEqual([kept, switched].sort());
      const patched = await api(g.h, 'patch', `/tasks/${switched}`, standard.organizationToken, {
        data: { type: 'tasks', attributes: { 'global-configuration': { enabled: false } } },
      });
      expect(patched.status).toBe(200);
      expect(patched.body.data.attributes['global-configuration']).toMatchObject({ enabled: false, stages: ['post_plan'] });
      const after = await createRun(g.h, standard.organizationToken, standard.workspaceId);
      expect((await resultsInDb(g.h, after)).map((result) => result.taskId)).toEqual([kept]);
      expect((await stagesInDb(g.h, after)).map((stage) => stage.stage)).toEqual(['pre_plan']);
    });

    it('plans a global task that is also attached once, with the workspace settings', async () => {
      const standard = await seedOrganization(g.h, uniqueName('both'));
      const standardId = await externalIdOf(g.h, standard.organization);
      const global = await createRunTask(g.h, standardId, 'global-and-attached', {
        global: { stages: ['pre_plan'], enforcementLevel: 'advisory' },
      });
      const association = await attachTask(g.h, standard.workspaceId, global, ['pre_plan'], 'mandatory');
      const runId = await createRun(g.h, standard.organizationToken, standard.workspaceId);
      const results = await resultsInDb(g.h, runId);
      expect(results).toHaveLength(1);
      expect(results[0]!.workspaceTaskId).toBe(association);
      expect(results[0]!.enforcementLevel).toBe('mandatory');
    });

    it('does not apply global tasks in a free organization', async () => {
      const free = await createOrganization(g.h, uniqueName('free'), { edition: 'free' });
      const token = await createOrganizationToken(g.h, free);
      const freeId = await externalIdOf(g.h, free);
      const workspaceId = await createWorkspace(g.h, free, token, 'free-ws');
      const global = await createRunTask(g.h, freeId, 'global-task', { global: { stages: ['pre_plan'], enforcementLevel: 'mandatory' } });
      const runId = await createRun(g.h, token, workspaceId);
      expect(await stagesInDb(g.h, runId)).toEqual([]);
      // An attached task still runs in a free organization.
      await attachTask(g.h, workspaceId, global, ['post_plan']);
      const attachedRun = await createRun(g.h, token, workspaceId);
      expect((await stagesInDb(g.h, attachedRun)).map((stage) => stage.stage)).toEqual(['post_plan']);
    });

    it('tells a team without manage-policy-overrides that it cannot override tasks', async () => {
      const workspaceId = await createWorkspace(g.h, org.organization, org.organizationToken, uniqueName('perm'));
      await attachTask(g.h, workspaceId, await createRunTask(g.h, orgId, uniqueName('perm-task')), ['pre_plan']);
      const runId = await createRun(g.h, org.organizationToken, workspaceId);
      const plain = await createTeam(g.h, org.organization, org.organizationToken, uniqueName('plain'));
      await grantWorkspace(g.h, org.organizationToken, plain, workspaceId, { access: 'read' });
      const overriders = await createTeam(g.h, org.organization, org.organizationToken, uniqueName('overriders'), {
        'manage-policy-overrides': true,
      });
      await grantWorkspace(g.h, org.organizationToken, overriders, workspaceId, { access: 'read' });

      const asPlain = await api(g.h, 'get', `/runs/${runId}?include=task_stages`, await createTeamToken(g.h, org.organizationToken, plain));
      expect(asPlain.status).toBe(200);
      expect(asPlain.body.included[0].attributes.permissions['can-override-tasks']).toBe(false);
      const asOverrider = await api(
        g.h,
        'get',
        `/runs/${runId}?include=task_stages`,
        await createTeamToken(g.h, org.organizationToken, overriders),
      );
      expect(asOverrider.body.included[0].attributes.permissions['can-override-tasks']).toBe(true);
    });
  });
});
