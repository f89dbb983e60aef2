import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { pruneAuditEvents, recordAuditRefusal } from '@runtasks/shared/audit';
import { nativePool } from '@runtasks/shared/db';
import { api, createRun, createTask, createTeam, createTeamToken, type Fixture, seedOrganization } from '../../../test/support/fixtures.ts';
import { type Harness, startHarness } from '../../../test/support/harness.ts';
import { type ScriptedServer, startScriptedServer } from '../../../test/support/scripted-server.ts';

interface TrailEvent {
  id: string;
  version: string;
  type: string;
  timestamp: string;
  auth: { accessor_id: string | null; description: string | null; type: string; organization_id: string };
  request: { id: string | null; client_address: string | null };
  resource: { id: string; type: string; action: string; meta: Record<string, unknown> | null };
}
interface Trail {
  data: TrailEvent[];
  pagination: { current_page: number; prev_page: number | null; next_page: number | null; total_pages: number; total_count: number };
}

/**
 * The audit trail (HCP's `GET /organization/audit-trail`) and its token (`?token=audit-trails`): who did
 * what, from where, read with a token that reads nothing else; secrets never in it; pruned past retention.
 */
describe('audit trail', () => {
  let h: Harness;
  let f: Fixture;
  let server: ScriptedServer;
  let orgId: string;
  const HMAC_KEY = 'an-hmac-key-that-must-never-be-shown';

  const sql = async <T>(text: string, values: unknown[] = []): Promise<T[]> =>
    (await (await nativePool(h.orm.em)).query(text, values)).rows as T[];
  const trail = async (token: string, query = ''): Promise<Trail> => {
    const res = await h.http.get(`/api/v2/organization/audit-trail${query}`).set('Authorization', `Bearer ${token}`);
    expect([res.status, res.type]).toEqual([200, 'application/json']);
    return res.body as Trail;
  };
  const auditToken = async (): Promise<{ id: string; secret: string }> => {
    const res = await api(h, 'post', `/organizations/${f.organization}/authentication-token?token=audit-trails`, f.organizationToken, {
      data: { type: '' },
    }).expect(201);
    return { id: res.body.data.id as string, secret: res.body.data.attributes.token as string };
  };

  beforeAll(async () => {
    h = await startHarness();
    f = await seedOrganization(h, 'audit-trail');
    [{ id: orgId }] = await sql<{ id: string }>(`select id from organizations where name = $1`, [f.organization]);
    server = await startScriptedServer((_delivery, res) => void res.writeHead(200).end());
  }, 30_000);

  afterAll(async () => {
    await server?.close();
    await h?.close();
  });

  it('issues, shows and deletes the audit trail token apart from the organization token', async () => {
    const issued = await auditToken();
    expect(issued.secret).toEqual(expect.any(String));
    const ordinary = await api(h, 'get', `/organizations/${f.organization}/authentication-token`, f.organizationToken).expect(200);
    const shown = await api(
      h,
      'get',
      `/organizations/${f.organization}/authentication-token?token=audit-trails`,
      f.organizationToken,
    ).expect(200);
    expect(shown.body.data.id).toBe(issued.id);
    expect(shown.body.data.attributes.token).toBeNull();
    expect(ordinary.body.data.id).not.toBe(issued.id);
    // Creating another replaces it: the first no longer reads.
    const second = await auditToken();
    await h.http.get('/api/v2/organization/audit-trail').set('Authorization', `Bearer ${issued.secret}`).expect(401);
    await api(h, 'delete', `/organizations/${f.organization}/authentication-token?token=audit-trails`, f.organizationToken).expect(204);
    await api(h, 'get', `/organizations/${f.organization}/authentication-token?token=audit-trails`, f.organizationToken).expect(404);
    await api(h, 'delete', `/organizations/${f.organization}/authentication-token?token=audit-trails`, f.organizationToken).expect(404);
    await h.http.get('/api/v2/organization/audit-trail').set('Authorization', `Bearer ${second.secret}`).expect(401);
    // A team's token manages no audit trail token.
    const teamToken = await createTeamToken(h, f.organizationToken, f.teamId);
    await api(h, 'post', `/organizations/${f.organization}/authentication-token?token=audit-trails`, teamToken).expect(404);
  });

  it("reads the trail with the audit trail token, and nothing else with it; finds a run task's creation without its HMAC key", async () => {
    const token = await auditToken();
    const taskId = await createTask(h, f, server.url, { name: 'audited', hmacKey: HMAC_KEY });
    await api(h, 'patch', `/tasks/${taskId}`, f.organizationToken, {
      data: { type: 'tasks', attributes: { 'hmac-key': `${HMAC_KEY}-2` } },
    }).expect(200);
    const read = await trail(token.secret);
    const created = read.data.find((event) => event.resource.type === 'task' && event.resource.action === 'create');
    expect(created).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      version: '0',
      type: 'Resource',
      timestamp: expect.stringMatching(/Z$/),
      auth: { accessor_id: `user-api-${orgId}`, description: `api-${orgId}`, type: 'Client', organization_id: orgId },
      request: { id: expect.any(String), client_address: expect.any(String) },
      resource: {
        id: taskId,
        type: 'task',
        action: 'create',
        meta: expect.objectContaining({ name: 'audited', 'hmac-key': '[redacted]' }),
      },
    });
    expect(read.data.some((event) => event.resource.type === 'task' && event.resource.action === 'update')).toBe(true);
    expect(read.data.some((event) => event.resource.type === 'audit_trail_token' && event.resource.action === 'create')).toBe(true);
    // No secret anywhere in the trail: neither key, nor any token.
    const text = JSON.stringify(read);
    for (const secret of [HMAC_KEY, token.secret, f.organizationToken]) expect(text).not.toContain(secret);
    const [stored] = await sql<{ all: string }>(`select string_agg(t::text, '|') as all from audit_events t`);
    expect(stored?.all).not.toContain(HMAC_KEY);

    // The audit trail token reads the trail and nothing else.
    for (const path of [
      `/organizations/${f.organization}`,
      `/organizations/${f.organization}/runs`,
      `/organizations/${f.organization}/tasks`,
      '/organizations',
    ])
      await api(h, 'get', path, token.secret).expect(401);
    // An owner's token reads it too; a team's token, or the site admin's (no organization), is refused.
    expect((await trail(f.organizationToken)).pagination.total_count).toBe(read.pagination.total_count);
    const teamToken = await createTeamToken(h, f.organizationToken, await createTeam(h, f.organization, f.organizationToken, 'auditors'));
    await h.http.get('/api/v2/organization/audit-trail').set('Authorization', `Bearer ${teamToken}`).expect(403);
    await h.http.get('/api/v2/organization/audit-trail').set('Authorization', `Bearer ${h.adminToken}`).expect(403);
    await h.http.get('/api/v2/organization/audit-trail').expect(401);
    // Another organization's trail is its own.
    const other = await seedOrganization(h, 'audit-trail-other');
    const theirs = await trail(other.organizationToken);
    expect(theirs.data.every((event) => event.auth.organization_id !== orgId)).toBe(true);
  });

  it('pages the trail, and keeps only the events after since', async () => {
    const all = await trail(f.organizationToken);
    const total = all.pagination.total_count;
    expect(total).toBeGreaterThanOrEqual(4);
    const first = await trail(f.organizationToken, '?page[size]=2');
    expect(first.data).toHaveLength(2);
    expect(first.pagination).toEqual({
      current_page: 1,
      prev_page: null,
      next_page: 2,
      total_pages: Math.ceil(total / 2),
      total_count: total,
    });
    const last = await trail(f.organizationToken, `?page[size]=2&page[number]=${Math.ceil(total / 2)}`);
    expect(last.pagination.next_page).toBeNull();
    const pivot = all.data[1];
    const after = await trail(f.organizationToken, `?since=${encodeURIComponent(pivot?.timestamp ?? '')}`);
    expect(after.data.every((event) => event.timestamp > (pivot?.timestamp ?? ''))).toBe(true);
    // go-tfe sends the client's local offset.
    const offset = await trail(f.organizationToken, `?since=${encodeURIComponent('2001-01-01T00:00:00-06:00')}`);
    expect(offset.pagination.total_count).toBe(total);
    const refused = await h.http
      .get('/api/v2/organization/audit-trail?since=yesterday')
      .set('Authorization', `Bearer ${f.organizationToken}`);
    expect(refused.status).toBe(422);
    expect(refused.body.errors[0].source).toEqual({ parameter: 'since' });
  });

  it('records overrides, enforcement changes, settings, tokens, sign-ins and refusals', async () => {
    await api(h, 'patch', `/organizations/${f.organization}`, h.adminToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    }).expect(200);
    const taskId = await createTask(h, f, server.url, { name: 'enforced' });
    const association = await api(h, 'post', `/workspaces/${f.workspaceId}/tasks`, f.organizationToken, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'mandatory', stages: ['post_plan'] },
        relationships: { task: { data: { type: 'tasks', id: taskId } } },
      },
    }).expect(201);
    await api(h, 'patch', `/workspaces/${f.workspaceId}/tasks/${association.body.data.id}`, f.organizationToken, {
      data: { type: 'workspace-tasks', attributes: { 'enforcement-level': 'advisory' } },
    }).expect(200);
    await api(h, 'patch', `/workspaces/${f.workspaceId}/tasks/${association.body.data.id}`, f.organizationToken, {
      data: { type: 'workspace-tasks', attributes: { 'enforcement-level': 'mandatory' } },
    }).expect(200);
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const [stage] = await sql<{ id: string }>(`select id from task_stages where run_id = $1 and stage = 'post_plan'`, [runId]);
    await sql(`update task_stages set status = 'awaiting_override' where id = $1`, [stage?.id]);
    await sql(`update runs set status = 'post_plan_awaiting_decision' where id = $1`, [runId]);
    await h.http
      .post(`/api/v2/task-stages/${stage?.id}/actions/override`)
      .set('Authorization', `Bearer ${f.organizationToken}`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ comment: 'Known issue' }))
      .expect(200);
    await api(h, 'delete', `/workspaces/${f.workspaceId}/tasks/${association.body.data.id}`, f.organizationToken).expect(204);
    await api(h, 'delete', `/tasks/${taskId}`, f.organizationToken).expect(204);
    const teamToken = await createTeamToken(h, f.organizationToken, f.teamId);
    await api(h, 'delete', `/teams/${f.teamId}/authentication-token`, f.organizationToken).expect(204);
    await recordAuditRefusal(await nativePool(h.orm.em), {
      organizationId: orgId,
      resourceType: 'trust_rule',
      resourceId: 'ci',
      reason: 'no trust rule matches the CI token',
      clientAddress: '203.0.113.9',
    });
    const events = (await trail(f.organizationToken)).data.map((event) => `${event.resource.type} ${event.resource.action}`);
    expect(events).toEqual(
      expect.arrayContaining([
        'organization update',
        'workspace_task create',
        'workspace_task change_enforcement',
        'task_stage override',
        'workspace_task destroy',
        'task destroy',
        'authentication_token create',
        'authentication_token destroy',
        'trust_rule refuse',
      ]),
    );
    expect(JSON.stringify(await trail(f.organizationToken))).not.toContain(teamToken);
    const override = (await trail(f.organizationToken)).data.find((event) => event.resource.type === 'task_stage');
    expect(override?.resource).toEqual({
      id: stage?.id,
      type: 'task_stage',
      action: 'override',
      meta: { run: runId, stage: 'post_plan', comment: 'Known issue' },
    });
  });

  it("records a member's joining and leaving a team, by the team routes and by their removal from the organization; not a no-op", async () => {
    const invited = await api(h, 'post', `/organizations/${f.organization}/organization-memberships`, f.organizationToken, {
      data: { type: 'organization-memberships', attributes: { email: 'team-mover@example.test' } },
    }).expect(201);
    const membershipId = invited.body.data.id as string;
    const userId = invited.body.data.relationships.user.data.id as string;
    const members = `/teams/${f.teamId}/relationships/organization-memberships`;
    const body = { data: [{ type: 'organization-memberships', id: membershipId }] };
    // Twice each: the second add and the second removal change nothing, and record nothing.
    for (const method of ['post', 'post', 'delete', 'delete', 'post'] as const)
      await api(h, method, members, f.organizationToken, body).expect(204);
    await api(h, 'delete', `/organization-memberships/${membershipId}`, f.organizationToken).expect(204);
    // An invitation onto a team is a joining too.
    const onTeam = await api(h, 'post', `/organizations/${f.organization}/organization-memberships`, f.organizationToken, {
      data: {
        type: 'organization-memberships',
        attributes: { email: 'invited-onto-team@example.test' },
        relationships: { teams: { data: [{ type: 'teams', id: f.teamId }] } },
      },
    }).expect(201);
    const invitedId = onTeam.body.data.relationships.user.data.id as string;
    const events = (await trail(f.organizationToken)).data.filter((event) => event.resource.type === 'team_membership');
    const invitation = events.filter((event) => event.resource.meta?.['user'] === invitedId);
    expect(invitation.map((event) => [event.resource.action, event.resource.id])).toEqual([['create', `${f.teamId}:${invitedId}`]]);
    const moves = events.filter((event) => event.resource.meta?.['user'] === userId);
    expect(moves.map((event) => event.resource.action).sort()).toEqual(['create', 'create', 'destroy', 'destroy']);
    for (const event of moves) {
      expect(event.resource).toMatchObject({ id: `${f.teamId}:${userId}`, meta: { team: f.teamId, user: userId } });
      expect(event.auth.organization_id).toBe(orgId);
    }
  });

  it('prunes the events past the retention, and only those', async () => {
    const pool = await nativePool(h.orm.em);
    const [old] = await sql<{ id: string }>(`select id from audit_events where organization_id = $1 order by timestamp limit 1`, [orgId]);
    await sql(`update audit_events set timestamp = now() - interval '91 days' where id = $1`, [old?.id]);
    const before = (await trail(f.organizationToken)).pagination.total_count;
    expect(await pruneAuditEvents(pool, 90)).toBe(1);
    const after = await trail(f.organizationToken);
    expect(after.pagination.total_count).toBe(before - 1);
    expect(after.data.map((event) => event.id)).not.toContain(old?.id);
    expect(await pruneAuditEvents(pool, 90)).toBe(0);
  });
});
