import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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
import { startHarness, type Harness } from '../../../test/support/harness.ts';

/**
 * The workspace run queue and workspace locks through the API, without a worker: what creation,
 * actions, locks and force-execute write is read back from the database (what a worker would find).
 */
describe('the workspace run queue and workspace locks', () => {
  let h: Harness;
  let acme: Fixture;
  let taskServer: Server;
  let taskUrl: string;

  beforeAll(async () => {
    h = await startHarness({ env: { TASK_DESTINATION_ALLOWLIST: '127.0.0.1/32' } });
    taskServer = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => taskServer.listen(0, '127.0.0.1', resolve));
    taskUrl = `http://127.0.0.1:${(taskServer.address() as AddressInfo).port}/`;
    acme = await seedOrganization(h, uniqueName('queue'));
  });
  afterAll(async () => {
    await new Promise((resolve) => taskServer.close(resolve));
    await h.close();
  });

  const sql = <T>(query: string, params: unknown[] = []): Promise<T[]> => h.orm.em.fork().getConnection().execute<T[]>(query, params);
  const runRow = async (id: string) =>
    (await sql<{ status: string; queue_state: string | null }>(`select status, queue_state from runs where id = ?`, [id]))[0];
  const newWorkspace = (label: string) => createWorkspace(h, acme.organization, acme.organizationToken, uniqueName(label));
  const workspaceDoc = async (id: string) => (await api(h, 'get', `/workspaces/${id}`, acme.organizationToken)).body.data;
  const advanceEvents = async (runId: string) =>
    Number(
      (await sql<{ n: string }>(`select count(*) as n from outbox_events where topic = 'run.advance' and aggregate_id = ?`, [runId]))[0]?.n,
    );

  it('keeps a second run pending, its pre_plan tasks unstarted, until the holder ends; then admits it with a wake-up', async () => {
    const workspaceId = await newWorkspace('pre-plan');
    await attachTask(h, acme, workspaceId, await createTask(h, acme, taskUrl), 'mandatory', ['pre_plan']);
    const first = await createRun(h, acme.organizationToken, workspaceId);
    const second = await api(h, 'post', '/runs', acme.organizationToken, {
      data: { type: 'runs', relationships: { workspace: { data: { type: 'workspaces', id: workspaceId } } } },
    });
    expect(second.status).toBe(201);
    expect(second.body.data.attributes.status).toBe('pending');
    const secondId = second.body.data.id as string;
    expect(await runRow(first)).toEqual({ status: 'pre_plan_running', queue_state: 'holding' });
    expect(await runRow(secondId)).toEqual({ status: 'pending', queue_state: 'queued' });
    const started = await sql<{ stage: string; result: string; attempts: number }>(
      `select ts.status as stage, tr.status as result, tr.attempts from task_stages ts join task_results tr on tr.task_stage_id = ts.id where ts.run_id = ?`,
      [secondId],
    );
    expect(started).toEqual([{ stage: 'pending', result: 'pending', attempts: 0 }]);
    const held = await workspaceDoc(workspaceId);
    expect(held.attributes.locked).toBe(true);
    expect(held.relationships['locked-by']).toEqual({ data: { type: 'runs', id: first } });

    // A plan-only run never waits, even behind a holder.
    const speculative = await createRun(h, acme.organizationToken, workspaceId, { 'plan-only': true });
    expect(await runRow(speculative)).toEqual({ status: 'pre_plan_running', queue_state: null });

    expect((await api(h, 'post', `/runs/${first}/actions/cancel`, acme.organizationToken)).status).toBe(202);
    expect(await runRow(secondId)).toEqual({ status: 'pending', queue_state: 'holding' });
    expect(await advanceEvents(secondId)).toBe(1);
    expect((await workspaceDoc(workspaceId)).relationships['locked-by']).toEqual({ data: { type: 'runs', id: secondId } });
  });

  it('locks and unlocks with HCP statuses, keeps new runs pending while locked, and starts the next on unlock', async () => {
    const workspaceId = await newWorkspace('lock');
    const [owners] = await sql<{ id: string }>(
      `select t.id from teams t join organizations o on o.id = t.organization_id where o.name = ? and t.is_owners`,
      [acme.organization],
    );
    const locked = await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, acme.organizationToken, { reason: 'maintenance' });
    expect(locked.status).toBe(200);
    expect(locked.body.data.attributes.locked).toBe(true);
    expect(locked.body.data.relationships['locked-by']).toEqual({ data: { type: 'teams', id: owners?.id } });
    expect(expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, acme.organizationToken), 409).detail).toBe(
      'The workspace is already locked.',
    );

    const waiting = await createRun(h, acme.organizationToken, workspaceId);
    expect(await runRow(waiting)).toEqual({ status: 'pending', queue_state: 'queued' });

    // Another team with the apply permission may lock, but not take off the owners' lock.
    const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('lockers'));
    await grantWorkspace(h, acme.organizationToken, teamId, workspaceId, { access: 'write' });
    const teamToken = await createTeamToken(h, acme.organizationToken, teamId);
    const refused = expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/unlock`, teamToken), 409);
    expect(refused.detail).toContain(`is locked by Team ${owners?.id}`);
    expect(await runRow(waiting)).toEqual({ status: 'pending', queue_state: 'queued' });

    const unlocked = await api(h, 'post', `/workspaces/${workspaceId}/actions/unlock`, acme.organizationToken);
    expect(unlocked.status).toBe(200);
    // The waiting run took the workspace in the same transaction: it is locked by that run now.
    expect(unlocked.body.data.relationships['locked-by']).toEqual({ data: { type: 'runs', id: waiting } });
    expect(await runRow(waiting)).toEqual({ status: 'pending', queue_state: 'holding' });
    expect(await advanceEvents(waiting)).toBe(1);
    const byRun = expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/unlock`, acme.organizationToken), 409);
    expect(byRun.detail).toBe(`Unable to unlock workspace. The workspace is locked by Run ${waiting}.`);
    expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/force-unlock`, acme.organizationToken), 409);
    expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, teamToken), 409);

    // With the run gone, the team locks; only force-unlock (managing the workspace) takes it off for the owners.
    expect((await api(h, 'post', `/runs/${waiting}/actions/discard`, acme.organizationToken)).status).toBe(202);
    const teamLock = await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, teamToken);
    expect(teamLock.body.data.relationships['locked-by']).toEqual({ data: { type: 'teams', id: teamId } });
    expect(teamLock.body.data.attributes.permissions).toMatchObject({ 'can-lock': true, 'can-unlock': true, 'can-force-unlock': false });
    expectNotFound(await api(h, 'post', `/workspaces/${workspaceId}/actions/force-unlock`, teamToken));
    const forced = await api(h, 'post', `/workspaces/${workspaceId}/actions/force-unlock`, acme.organizationToken);
    expect([forced.status, forced.body.data.attributes.locked, forced.body.data.relationships['locked-by']]).toEqual([
      200,
      false,
      { data: null },
    ]);
    expect(expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/unlock`, teamToken), 409).detail).toBe(
      'The workspace is already unlocked.',
    );
  });

  it('refuses locking to a caller without the apply permission (403 naming it, and can-lock false), and a bad reason changes nothing', async () => {
    const workspaceId = await newWorkspace('lock-perm');
    const teamId = await createTeam(h, acme.organization, acme.organizationToken, uniqueName('planners'));
    await grantWorkspace(h, acme.organizationToken, teamId, workspaceId, { access: 'plan' });
    const planToken = await createTeamToken(h, acme.organizationToken, teamId);
    expect((await api(h, 'get', `/workspaces/${workspaceId}`, planToken)).body.data.attributes.permissions).toMatchObject({
      'can-lock': false,
      'can-unlock': false,
      'can-force-unlock': false,
    });
    expect(expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, planToken), 403).detail).toBe(
      'This token may read the workspace but may not lock it: that takes the "apply" runs permission on the workspace.',
    );
    expectError(await api(h, 'post', `/workspaces/${workspaceId}/actions/lock`, acme.organizationToken, { reason: 42 }), 422, '/reason');
    expect((await workspaceDoc(workspaceId)).attributes.locked).toBe(false);
    expectNotFound(await api(h, 'post', `/workspaces/ws-doesnotexist0000/actions/lock`, acme.organizationToken));
  });

  it('force-executes a waiting run: the runs ahead are discarded, it holds the workspace, and each is woken', async () => {
    const workspaceId = await newWorkspace('force');
    const ahead = await createRun(h, acme.organizationToken, workspaceId);
    const middle = await createRun(h, acme.organizationToken, workspaceId);
    const target = await createRun(h, acme.organizationToken, workspaceId);
    const behind = await createRun(h, acme.organizationToken, workspaceId);
    const shown = await api(h, 'get', `/runs/${target}`, acme.organizationToken);
    expect(shown.body.data.attributes.permissions).toMatchObject({ 'can-force-execute': true, 'can-force-cancel': true });

    expect((await api(h, 'post', `/runs/${target}/actions/force-execute`, acme.organizationToken)).status).toBe(202);
    expect(await Promise.all([ahead, middle, target, behind].map(runRow))).toEqual([
      { status: 'discarded', queue_state: 'holding' },
      { status: 'discarded', queue_state: 'queued' },
      { status: 'pending', queue_state: 'holding' },
      { status: 'pending', queue_state: 'queued' },
    ]);
    expect(await Promise.all([ahead, middle, target].map(advanceEvents))).toEqual([1, 1, 1]);
    const again = expectError(await api(h, 'post', `/runs/${target}/actions/force-execute`, acme.organizationToken), 409);
    expect(again.title).toBe('transition not allowed');
    const speculative = await createRun(h, acme.organizationToken, workspaceId, { 'plan-only': true });
    expectError(await api(h, 'post', `/runs/${speculative}/actions/force-execute`, acme.organizationToken), 409);
    expect(await runRow(speculative)).toEqual({ status: 'pending', queue_state: null });
    expectNotFound(await api(h, 'post', `/runs/run-doesnotexist0000/actions/force-execute`, acme.organizationToken));
  });

  it('offers force-cancel a cool-off after a cancel, and refuses it since a cancel here ends the run at once', async () => {
    const workspaceId = await newWorkspace('force-cancel');
    await createRun(h, acme.organizationToken, workspaceId);
    const waiting = await createRun(h, acme.organizationToken, workspaceId);
    const before = (await api(h, 'get', `/runs/${waiting}`, acme.organizationToken)).body.data.attributes;
    expect([before['force-cancel-available-at'], before.actions['is-force-cancelable']]).toEqual([null, false]);
    expect((await api(h, 'post', `/runs/${waiting}/actions/cancel`, acme.organizationToken)).status).toBe(202);
    const after = (await api(h, 'get', `/runs/${waiting}`, acme.organizationToken)).body.data.attributes;
    const canceledAt = Date.parse(after['status-timestamps']['canceled-at'] as string);
    expect(Date.parse(after['force-cancel-available-at'] as string) - canceledAt).toBe(3_600_000);
    expect(after.actions['is-force-cancelable']).toBe(false);
    const refused = expectError(await api(h, 'post', `/runs/${waiting}/actions/force-cancel`, acme.organizationToken), 409);
    expect(refused.detail).toContain('this one is canceled');
  });
});
