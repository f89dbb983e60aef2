import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createTeam,
  createTeamToken,
  type Fixture,
  grantWorkspace,
  seedOrganization,
} from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { type ScriptedServer, startScriptedServer } from '../../../test/support/scripted-server.ts';

interface EventResource {
  id: string;
  type: string;
  attributes: { action: string; 'created-at': string; description: string };
  relationships: { actor: { data: { id: string; type: string } | null }; comment: { data: { id: string; type: string } | null } };
}

/**
 * `GET /runs/:id/run-events` and `GET /run-events/:id` in HCP's shape (go-tfe's RunEvents): every
 * action's actor and comment, linkage always, included on request; 404 where the run is not readable.
 */
describe('run events API', () => {
  let h: Harness;
  let f: Fixture;
  let server: ScriptedServer;
  let teamToken: string;
  let outsiderToken: string;
  let orgId: string;

  const sql = async <T>(text: string, values: unknown[] = []): Promise<T[]> =>
    (await (await nativePool(h.orm.em)).query(text, values)).rows as T[];

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'run-events-api');
    await api(h, 'patch', `/organizations/${f.organization}`, h.adminToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    }).expect(200);
    [{ id: orgId }] = await sql<{ id: string }>(`select id from organizations where name = $1`, [f.organization]);
    server = await startScriptedServer((_delivery, res) => void res.writeHead(200).end());
    await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url, { name: 'scanner' }), 'mandatory', ['post_plan']);
    await grantWorkspace(h, f.organizationToken, f.teamId, f.workspaceId, { access: 'write' });
    teamToken = await createTeamToken(h, f.organizationToken, f.teamId);
    // A team of the same organization with no access to the workspace.
    outsiderToken = await createTeamToken(h, f.organizationToken, await createTeam(h, f.organization, f.organizationToken, 'outsiders'));
  }, 30_000);

  afterAll(async () => {
    await server?.close();
    await h?.close();
  });

  it("lists an override's event naming its actor and keeping its comment, with linkage always and resources on request", async () => {
    const runId = await createRun(h, teamToken, f.workspaceId);
    const [stage] = await sql<{ id: string }>(`select id from task_stages where run_id = $1`, [runId]);
    await sql(`update task_stages set status = 'awaiting_override' where id = $1`, [stage?.id]);
    await sql(`update runs set status = 'post_plan_awaiting_decision' where id = $1`, [runId]);
    const overridden = await h.http
      .post(`/api/v2/task-stages/${stage?.id}/actions/override`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ comment: 'Accepted: the upgrade is scheduled' }));
    expect(overridden.status).toBe(200);

    const bare = await api(h, 'get', `/runs/${runId}/run-events`, teamToken).expect(200);
    const events = bare.body.data as EventResource[];
    expect(events.map((event) => event.attributes.action)).toEqual(['created', 'overridden']);
    expect(bare.body.included).toBeUndefined();
    const [created, override] = events;
    expect(created).toMatchObject({
      id: expect.stringMatching(/^re-/),
      type: 'run-events',
      attributes: { description: 'Run created', 'created-at': expect.stringMatching(/Z$/) },
      relationships: { actor: { data: { type: 'users', id: `user-api-${f.teamId}` } }, comment: { data: null } },
    });
    expect(override?.attributes.description).toBe('Overrode the post_plan task stage');
    const ownerId = `user-api-${orgId}`;
    expect(override?.relationships.actor.data?.id).toBe(ownerId);
    const commentId = override?.relationships.comment.data?.id;
    expect(override?.relationships.comment.data?.type).toBe('comments');

    const full = await api(h, 'get', `/runs/${runId}/run-events?include=actor,comment`, teamToken).expect(200);
    const included = full.body.included as { id: string; type: string; attributes: Record<string, unknown> }[];
    expect(included).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          type: 'users',
          id: ownerId,
          attributes: expect.objectContaining({ username: expect.stringMatching(/^api-org-/) }),
        }),
        expect.objectContaining({
          type: 'users',
          id: `user-api-${f.teamId}`,
          attributes: expect.objectContaining({ username: `api-${f.teamId}` }),
        }),
        expect.objectContaining({
          type: 'comments',
          id: commentId,
          attributes: expect.objectContaining({ body: 'Accepted: the upgrade is scheduled' }),
        }),
      ]),
    );
    expect(included).toHaveLength(3);

    const one = await api(h, 'get', `/run-events/${override?.id}?include=comment`, teamToken).expect(200);
    expect(one.body.data).toEqual(override);
    expect(one.body.included).toEqual([
      expect.objectContaining({ id: commentId, attributes: expect.objectContaining({ body: 'Accepted: the upgrade is scheduled' }) }),
    ]);
  });

  it('lists a comment as a commented event, and a confirm with its comment', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    await api(h, 'post', `/runs/${runId}/comments`, teamToken, { data: { type: 'comments', attributes: { body: 'Looks fine' } } }).expect(
      201,
    );
    await sql(`update runs set status = 'post_plan_completed' where id = $1`, [runId]);
    await api(h, 'post', `/runs/${runId}/actions/apply`, teamToken, { comment: 'Ship it' }).expect(202);
    const res = await api(h, 'get', `/runs/${runId}/run-events?include=comment`, f.organizationToken).expect(200);
    const events = res.body.data as EventResource[];
    expect(events.map((event) => [event.attributes.action, event.relationships.actor.data?.id])).toEqual([
      ['created', `user-api-${orgId}`],
      ['commented', `user-api-${f.teamId}`],
      ['confirmed', `user-api-${f.teamId}`],
    ]);
    const bodies = (res.body.included as { attributes: { body: string } }[]).map((comment) => comment.attributes.body);
    expect(bodies).toEqual(['Looks fine', 'Ship it']);
  });

  it('hides the events of a run the caller may not read, and refuses an include it does not serve', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const [event] = await sql<{ id: string }>(`select id from run_events where run_id = $1`, [runId]);
    await api(h, 'get', `/runs/${runId}/run-events`, outsiderToken).expect(404);
    await api(h, 'get', `/run-events/${event?.id}`, outsiderToken).expect(404);
    await api(h, 'get', `/run-events/nonexisting`, f.organizationToken).expect(404);
    await api(h, 'get', `/runs/nonexisting/run-events`, f.organizationToken).expect(404);
    const other = await seedOrganization(h, 'run-events-other');
    await api(h, 'get', `/run-events/${event?.id}`, other.organizationToken).expect(404);
    await api(h, 'get', `/run-events/${event?.id}`, h.adminToken).expect(200);
    const refused = await api(h, 'get', `/runs/${runId}/run-events?include=target`, f.organizationToken).expect(400);
    expect(refused.body.errors[0].detail).toMatch(/include parameter/);
    await api(h, 'get', `/runs/${runId}/run-events`).expect(401);
  });
});
