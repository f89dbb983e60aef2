import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { expectError, expectNotFound, uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startAcknowledgingServer } from '../../../test/support/ack-server.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * Who may read and act on runs, and what a waiting run says of its queue, through the API with the
 * defaults a user has (rate limiting on), without a worker: stage states a worker would write are
 * written here as it would.
 */
describe('run access by permission, and what a queued run waits for', () => {
  let h: Harness;
  let acme: Fixture;
  let taskServer: Awaited<ReturnType<typeof startAcknowledgingServer>>;
  let taskUrl: string;

  beforeAll(async () => {
    taskServer = await startAcknowledgingServer();
    taskUrl = taskServer.url;
    // Many requests a second from one address, as no client sends them: the rate limit (its own tests hold
    // it) is raised so that what is checked here is access and the queue, not the limiter.
    h = await startHarness({ ops: true, env: { TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32', RATE_LIMIT_PER_SECOND: '1000' } });
    acme = await seedOrganization(h, uniqueName('access'));
    await api(h, 'patch', `/organizations/${acme.organization}`, acme.organizationToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    });
  });
  afterAll(async () => {
    await taskServer.close();
    await h.close();
  });

  const sql = (query: string, params: unknown[] = []) => h.orm.em.fork().execute(query, params);
  const newWorkspace = (label: string) => createWorkspace(h, acme.organization, acme.organizationToken, uniqueName(label));
  const teamToken = async (label: string, organizationAccess: Record<string, boolean>, grant?: { workspaceId: string; access: string }) => {
    const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName(label), organizationAccess);
    if (grant) await grantWorkspace(h, acme.organizationToken, teamId, grant.workspaceId, { access: grant.access });
    return { teamId, token: await createTeamToken(h, acme.organizationToken, teamId) };
  };

  describe('manage-policy-overrides, as HCP documents it', () => {
    it('reads runs, task stages and task results in every workspace of its organization, and overrides', async () => {
      const workspaceId = await newWorkspace('policy');
      await attachTask(h, acme, workspaceId, await createTask(h, acme, taskUrl), 'mandatory', ['pre_plan']);
      const runId = await createRun(h, acme.organizationToken, workspaceId);
      const overriders = await teamToken('overriders', { 'manage-policy-overrides': true });
      const plain = await teamToken('plain', {});

      const run = await api(h, 'get', `/runs/${runId}?include=task_stages`, overriders.token);
      expect(run.status).toBe(200);
      const stage = run.body.included[0];
      expect(stage.attributes.permissions['can-override-tasks']).toBe(true);
      // It reads, and may do nothing else with the run.
      expect(run.body.data.attributes.permissions).toMatchObject({ 'can-apply': false, 'can-cancel': false, 'can-discard': false });
      const resultId = stage.relationships['task-results'].data[0].id as string;
      expect((await api(h, 'get', `/runs/${runId}/task-stages`, overriders.token)).body.data.map((s: { id: string }) => s.id)).toEqual([
        stage.id,
      ]);
      expect((await api(h, 'get', `/task-stages/${stage.id}`, overriders.token)).status).toBe(200);
      expect((await api(h, 'get', `/task-results/${resultId}`, overriders.token)).status).toBe(200);
      expect((await api(h, 'get', `/workspaces/${workspaceId}/runs`, overriders.token)).body.data.map((r: { id: string }) => r.id)).toEqual(
        [runId],
      );
      // A team without it and without access sees none of it.
      expectNotFound(await api(h, 'get', `/runs/${runId}`, plain.token));
      expectNotFound(await api(h, 'get', `/task-stages/${stage.id}`, plain.token));
      expectNotFound(await api(h, 'get', `/task-results/${resultId}`, plain.token));
      // Reading runs is all it implies: the workspace itself, and acting on the run, stay out of reach.
      expectNotFound(await api(h, 'get', `/workspaces/${workspaceId}`, overriders.token));
      expect(expectError(await api(h, 'post', `/runs/${runId}/actions/cancel`, overriders.token), 403).detail).toBe(
        'This token may read the run but may not cancel it: that takes the "apply" runs permission on the workspace.',
      );

      await sql(`update task_stages set status = 'awaiting_override', updated_at = now() where id = ?`, [stage.id]);
      await sql(`update runs set status = 'pre_plan_awaiting_decision', updated_at = now() where id = ?`, [runId]);
      const overridden = await api(h, 'post', `/task-stages/${stage.id}/actions/override`, overriders.token, { comment: 'accepted risk' });
      expect(overridden.status).toBe(200);
      expect(overridden.body.data.attributes.status).toBe('running');

      // Another organization's runs stay unseen.
      const other = await seedOrganization(h, uniqueName('elsewhere'));
      const otherRun = await createRun(h, other.organizationToken, other.workspaceId);
      expectNotFound(await api(h, 'get', `/runs/${otherRun}`, overriders.token));
    });

    it('tells a reader without it that overriding takes it (403); a stage one cannot read stays a 404', async () => {
      const workspaceId = await newWorkspace('no-override');
      await attachTask(h, acme, workspaceId, await createTask(h, acme, taskUrl), 'mandatory', ['pre_plan']);
      const runId = await createRun(h, acme.organizationToken, workspaceId);
      const stageId = (await api(h, 'get', `/runs/${runId}`, acme.organizationToken)).body.data.relationships['task-stages'].data[0].id;
      await sql(`update task_stages set status = 'awaiting_override', updated_at = now() where id = ?`, [stageId]);
      const reader = await teamToken('reader', {}, { workspaceId, access: 'read' });
      const refused = expectError(await api(h, 'post', `/task-stages/${stageId}/actions/override`, reader.token, {}), 403);
      expect(refused.detail).toContain('"manage policy overrides"');
      const stranger = await teamToken('stranger', {});
      expectNotFound(await api(h, 'post', `/task-stages/${stageId}/actions/override`, stranger.token, {}));
      const [row] = await sql(`select status from task_stages where id = ?`, [stageId]);
      expect(row?.['status']).toBe('awaiting_override');
    });
  });

  describe('waiting-for', () => {
    it('names the run a queued run waits behind, since when and by whom; the holder and ended runs wait for nothing', async () => {
      const workspaceId = await newWorkspace('queue');
      const pipeline = await teamToken('pipeline', {}, { workspaceId, access: 'write' });
      const holder = await createRun(h, pipeline.token, workspaceId, { message: 'deploy abc123' });
      const second = await api(h, 'post', '/runs', acme.organizationToken, {
        data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } },
      });
      expect(second.status).toBe(201);
      const holderDoc = (await api(h, 'get', `/runs/${holder}`, acme.organizationToken)).body.data;
      const expected = {
        position: 1,
        run: {
          id: holder,
          status: 'pending',
          since: holderDoc.attributes['created-at'],
          'created-by': `user-api-${pipeline.teamId}`,
          'created-by-username': `api-${pipeline.teamId}`,
          message: 'deploy abc123',
        },
        lock: null,
      };
      expect(second.body.data.attributes['waiting-for']).toEqual(expected);
      const third = await createRun(h, acme.organizationToken, workspaceId);
      expect((await api(h, 'get', `/runs/${third}`, acme.organizationToken)).body.data.attributes['waiting-for']).toEqual({
        ...expected,
        position: 2,
      });
      expect(holderDoc.attributes['waiting-for']).toBeNull();
      const listed = await api(h, 'get', `/workspaces/${workspaceId}/runs`, acme.organizationToken);
      const byId = Object.fromEntries(
        listed.body.data.map((run: { id: string; attributes: Record<string, unknown> }) => [run.id, run.attributes['waiting-for']]),
      );
      expect(byId).toEqual({ [holder]: null, [second.body.data.id]: expected, [third]: { ...expected, position: 2 } });
      // Canceling the holder frees the workspace: the next run holds it and waits for nothing.
      expect((await api(h, 'post', `/runs/${holder}/actions/cancel`, acme.organizationToken)).status).toBe(202);
      expect((await api(h, 'get', `/runs/${second.body.data.id}`, acme.organizationToken)).body.data.attributes['waiting-for']).toBeNull();
      expect((await api(h, 'get', `/runs/${third}`, acme.organizationToken)).body.data.attributes['waiting-for']).toMatchObject({
        position: 1,
        run: { id: second.body.data.id },
      });
    });

    it("names a person's lock that keeps a run waiting", async () => {
      const workspaceId = await newWorkspace('locked');
      expect(
        (await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, acme.organizationToken, { reason: 'maintenance' })).status,
      ).toBe(200);
      const waiting = await createRun(h, acme.organizationToken, workspaceId);
      const attributes = (await api(h, 'get', `/runs/${waiting}`, acme.organizationToken)).body.data.attributes;
      expect(attributes['waiting-for']).toEqual({
        position: 0,
        run: null,
        lock: { type: 'teams', id: expect.stringMatching(/^team-/), reason: 'maintenance' },
      });
      // A plan-only run never waits.
      const speculative = await createRun(h, acme.organizationToken, workspaceId, { 'plan-only': true });
      expect((await api(h, 'get', `/runs/${speculative}`, acme.organizationToken)).body.data.attributes['waiting-for']).toBeNull();
    });
  });
});
