import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { dbIso, nativePool } from '@runtasks/shared/db';
import { CHANGING_PLAN } from '../../../test/support/plan-documents.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createTeamToken,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { type ScriptedServer, startScriptedServer } from '../../../test/support/scripted-server.ts';

interface EventRow {
  id: string;
  action: string;
  actor_id: string | null;
  comment: string | null;
  task_stage_id: string | null;
  description: string | null;
  created_at: string;
}

/**
 * Who did what to a run: the engine records a run event with every action, in the action's own
 * transaction (same clock reading), its comment a run comment linked from the event; a refused action
 * records nothing.
 */
describe('run events', () => {
  let h: Harness;
  let f: Fixture;
  let server: ScriptedServer;
  let teamToken: string;
  let orgId: string;

  const sql = async <T>(text: string, values: unknown[] = []): Promise<T[]> =>
    (await (await nativePool(h.orm.em)).query(text, values)).rows as T[];
  const eventsOf = (runId: string): Promise<EventRow[]> =>
    sql<EventRow>(
      `select e.id, e.action, e.actor_id, c.body as comment, e.task_stage_id, e.description, e.created_at::text
         from run_events e left join run_comments c on c.id = e.comment_id where e.run_id = $1 order by e.created_at, e.id`,
      [runId],
    );
  const orgActor = (): string => `user-api-${orgId}`;

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'run-events');
    await api(h, 'patch', `/organizations/${f.organization}`, h.adminToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    }).expect(200);
    [{ id: orgId }] = await sql<{ id: string }>(`select id from organizations where name = $1`, [f.organization]);
    server = await startScriptedServer((_delivery, res) => void res.writeHead(200).end());
    await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url, { name: 'scanner' }), 'mandatory', ['post_plan']);
    await grantWorkspace(h, f.organizationToken, f.teamId, f.workspaceId, { access: 'write' });
    teamToken = await createTeamToken(h, f.organizationToken, f.teamId);
  }, 30_000);

  afterAll(async () => {
    await server?.close();
    await h?.close();
  });

  it('records who created a run, in the statement that created it', async () => {
    const runId = await createRun(h, teamToken, f.workspaceId, { message: 'by a team' });
    const [created] = await sql<{ created_at: string }>(`select created_at::text from runs where id = $1`, [runId]);
    expect(await eventsOf(runId)).toEqual([
      {
        id: expect.stringMatching(/^re-[A-Za-z0-9]{16}$/),
        action: 'created',
        actor_id: `user-api-${f.teamId}`,
        comment: null,
        task_stage_id: null,
        description: null,
        created_at: created?.created_at,
      },
    ]);
  });

  it('records an override with its stage, who, when and the comment as a run comment; a refused one records nothing', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const [stage] = await sql<{ id: string }>(`select id from task_stages where run_id = $1`, [runId]);
    await sql(`update task_stages set status = 'awaiting_override' where id = $1`, [stage?.id]);
    await sql(`update runs set status = 'post_plan_awaiting_decision' where id = $1`, [runId]);
    const override = (comment?: string) =>
      h.http
        .post(`/api/v2/task-stages/${stage?.id}/actions/override`)
        .set('Authorization', `Bearer ${f.organizationToken}`)
        .set('Content-Type', 'application/json')
        .send(JSON.stringify(comment === undefined ? {} : { comment }));
    expect((await override('Accepted: the upgrade is scheduled')).status).toBe(200);
    expect((await override('again')).status).toBe(409);
    const events = await eventsOf(runId);
    expect(events.map((event) => event.action)).toEqual(['created', 'overridden']);
    expect(events[1]).toMatchObject({
      actor_id: orgActor(),
      comment: 'Accepted: the upgrade is scheduled',
      task_stage_id: stage?.id,
      description: 'Overrode the post_plan task stage',
    });
    // The comment is the run's, where the comments API lists it.
    const comments = await api(h, 'get', `/runs/${runId}/comments`, f.organizationToken);
    expect(comments.body.data.map((comment: { attributes: { body: string } }) => comment.attributes.body)).toEqual([
      'Accepted: the upgrade is scheduled',
    ]);
  });

  it('records confirm, discard and cancel with their comments, in the transaction of the action (one clock reading)', async () => {
    const confirmed = await createRun(h, f.organizationToken, f.workspaceId);
    await sql(`update runs set status = 'post_plan_completed' where id = $1`, [confirmed]);
    expect((await api(h, 'post', `/runs/${confirmed}/actions/apply`, teamToken, { comment: 'Ship it' })).status).toBe(202);
    const discarded = await createRun(h, f.organizationToken, f.workspaceId);
    await sql(`update runs set status = 'post_plan_completed' where id = $1`, [discarded]);
    expect((await api(h, 'post', `/runs/${discarded}/actions/discard`, f.organizationToken)).status).toBe(202);
    const canceled = await createRun(h, f.organizationToken, f.workspaceId);
    expect((await api(h, 'post', `/runs/${canceled}/actions/cancel`, h.adminToken, { comment: 'Wrong branch' })).status).toBe(202);
    // Refused (409): nothing recorded.
    expect((await api(h, 'post', `/runs/${canceled}/actions/apply`, f.organizationToken, { comment: 'no' })).status).toBe(409);

    const last = async (runId: string) => (await eventsOf(runId)).slice(1);
    // The event's clock reading is the action's: the same transaction's now(), as the run's status timestamp has it.
    const sameInstant = async (runId: string, eventAt: string | undefined, key: string): Promise<boolean> =>
      (
        await sql<{ same: boolean }>(`select ${dbIso('$2::timestamptz')} = status_timestamps->>$3 as same from runs where id = $1`, [
          runId,
          eventAt,
          key,
        ])
      )[0]?.same === true;
    const [confirm] = await last(confirmed);
    expect(confirm).toMatchObject({ action: 'confirmed', actor_id: `user-api-${f.teamId}`, comment: 'Ship it' });
    expect(await sameInstant(confirmed, confirm?.created_at, 'confirmed-at')).toBe(true);
    expect(await last(discarded)).toEqual([expect.objectContaining({ action: 'discarded', actor_id: orgActor(), comment: null })]);
    expect(await last(canceled)).toEqual([
      expect.objectContaining({ action: 'canceled', actor_id: 'user-site-admin', comment: 'Wrong branch' }),
    ]);
    const [{ confirmed_by: confirmedBy } = { confirmed_by: '' }] = await sql<{ confirmed_by: string }>(
      `select confirmed_by from runs where id = $1`,
      [confirmed],
    );
    expect(confirmedBy).toBe(confirm?.actor_id);
  });

  it('records a comment as a commented event linking it, and the run events of force-execute', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const posted = await api(h, 'post', `/runs/${runId}/comments`, teamToken, {
      data: { type: 'comments', attributes: { body: 'Looks fine' } },
    });
    expect(posted.status).toBe(201);
    const [, commented] = await eventsOf(runId);
    expect(commented).toMatchObject({ action: 'commented', actor_id: `user-api-${f.teamId}`, comment: 'Looks fine' });
    const [link] = await sql<{ comment_id: string }>(`select comment_id from run_events where id = $1`, [commented?.id]);
    expect(link?.comment_id).toBe(posted.body.data.id);

    const workspace = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'queue' } },
    });
    const workspaceId = workspace.body.data.id as string;
    const ahead = await createRun(h, f.organizationToken, workspaceId);
    const target = await createRun(h, f.organizationToken, workspaceId);
    expect((await api(h, 'post', `/runs/${target}/actions/force-execute`, h.adminToken, { comment: 'Hotfix first' })).status).toBe(202);
    expect((await eventsOf(ahead)).slice(1)).toEqual([
      expect.objectContaining({
        action: 'discarded',
        actor_id: 'user-site-admin',
        description: `Ended so that ${target} could start (force-execute)`,
      }),
    ]);
    expect((await eventsOf(target)).slice(1)).toEqual([
      expect.objectContaining({ action: 'force_executed', actor_id: 'user-site-admin', comment: 'Hotfix first' }),
    ]);
  });

  it("records a pipeline's plan and apply reports, and nothing for a repeat or a report refused", async () => {
    const local = await api(h, 'post', `/organizations/${f.organization}/workspaces`, f.organizationToken, {
      data: { type: 'workspaces', attributes: { name: 'pipeline', 'execution-mode': 'local' } },
    });
    const runId = await createRun(h, f.organizationToken, local.body.data.id as string);
    await sql(`update runs set status = 'planning' where id = $1`, [runId]);
    const putPlan = (plan: unknown) =>
      h.http
        .put(`/api/v2/runs/${runId}/plan/json-output`)
        .set('Authorization', `Bearer ${f.organizationToken}`)
        .set('Content-Type', 'application/json')
        .send(JSON.stringify(plan));
    expect((await putPlan(CHANGING_PLAN)).status).toBe(200);
    // The same plan again is answered as a repeat; another plan is refused: neither is an event.
    expect((await putPlan(CHANGING_PLAN)).status).toBe(200);
    expect((await putPlan({ ...CHANGING_PLAN, terraform_version: '0.0.1-other' })).status).toBe(409);
    await sql(`update runs set status = 'applying' where id = $1`, [runId]);
    expect((await api(h, 'post', `/runs/${runId}/apply/actions/finish`, f.organizationToken)).status).toBe(200);
    expect((await eventsOf(runId)).map(({ action, actor_id, description }) => ({ action, actor_id, description }))).toEqual([
      { action: 'created', actor_id: orgActor(), description: null },
      {
        action: 'plan_reported',
        actor_id: orgActor(),
        description: expect.stringMatching(/^Plan: \d+ to add, \d+ to change, \d+ to destroy$/),
      },
      { action: 'apply_reported', actor_id: orgActor(), description: null },
    ]);
  });
});
