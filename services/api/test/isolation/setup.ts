import { afterAll, beforeAll } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { DeliveryAttempt, TaskResultOutcome } from '@runtasks/shared/db';
import { CALLBACK_TOKEN_PREFIX, generateToken } from '@runtasks/shared/security';
import { createServer } from 'node:http';
import { type AddressInfo } from 'node:net';
import { configurationArchive } from '../../../../test/support/archives.ts';
import { startHarness } from '../../../../test/support/harness.ts';
import {
  api,
  createOrganizationToken,
  createRun,
  createTeam,
  createTeamToken,
  createWorkspace,
  grantWorkspace,
  seedOrganization,
} from '../../../../test/support/fixtures.ts';
import { type IsolationState, isolationCalls } from './calls.ts';
import { MISSING, ORG_A, ORG_B } from './params.ts';
import { taskServer } from './bodies.ts';
import { MAX_UPLOAD_BYTES } from './routes.ts';

/** Two organizations, tokens of every kind, a task server and a configuration version; and the calls the matrix makes. */
export function useIsolation() {
  const g = { requestsSent: 0 } as IsolationState;
  const calls = isolationCalls(g);
  const { snapshot, uploadPath } = calls;

  beforeAll(async () => {
    g.h = await startHarness({ env: { CONFIGURATION_VERSION_MAX_BYTES: String(MAX_UPLOAD_BYTES) } });
    g.a = await seedOrganization(g.h, ORG_A);
    g.b = await seedOrganization(g.h, ORG_B);
    // Issuing a new organization token revokes the previous one: B's first token is now revoked.
    g.revokedToken = g.b.organizationToken;
    g.b = { ...g.b, organizationToken: await createOrganizationToken(g.h, ORG_B) };
    // seedOrganization's team has no organization permissions and no workspace access.
    g.noPermissionTeamToken = await createTeamToken(g.h, g.a.organizationToken, g.a.teamId);
    g.grantedTeamId = await createTeam(g.h, ORG_A, g.a.organizationToken, `${ORG_A}-granted`);
    const teamWorkspaceId = await grantWorkspace(g.h, g.a.organizationToken, g.grantedTeamId, g.a.workspaceId, { access: 'read' });
    g.readTeamToken = await createTeamToken(g.h, g.a.organizationToken, g.grantedTeamId);
    g.allAccessTeamId = await createTeam(g.h, ORG_A, g.a.organizationToken, `${ORG_A}-all-access`, {
      'manage-run-tasks': true,
      'manage-workspaces': true,
      'manage-policy-overrides': true,
    });
    g.allAccessTeamToken = await createTeamToken(g.h, g.a.organizationToken, g.allAccessTeamId);
    // A task server that acknowledges the verification request of the run task below.
    const listening = createServer((req, res) => {
      taskServer.requests += 1;
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    g.server = listening;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', () => resolve()));
    taskServer.url = `http://127.0.0.1:${(listening.address() as AddressInfo).port}/task`;
    const task = await api(g.h, 'post', `/organizations/${ORG_A}/tasks`, g.a.organizationToken, {
      data: { type: 'tasks', attributes: { name: 'isolation-task', url: taskServer.url, category: 'task' } },
    });
    if (task.status !== 201) throw new Error(`create run task: ${task.status} ${task.text}`);
    const taskId = task.body.data.id as string;
    const association = await api(g.h, 'post', `/workspaces/${g.a.workspaceId}/tasks`, g.a.organizationToken, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'advisory', stages: ['post_plan'] },
        relationships: { task: { data: { type: 'tasks', id: taskId } } },
      },
    });
    if (association.status !== 201) throw new Error(`associate run task: ${association.status} ${association.text}`);
    // Created after the association, so the run has a post_plan task stage holding one task result.
    const runId = await createRun(g.h, g.a.organizationToken, g.a.workspaceId, { message: 'isolation' });
    const run = await api(g.h, 'get', `/runs/${runId}?include=task_stages`, g.a.organizationToken);
    if (run.status !== 200) throw new Error(`read run: ${run.status} ${run.text}`);
    const [stage] = run.body.included as { id: string; relationships: { 'task-results': { data: { id: string }[] } } }[];
    const resultId = stage?.relationships['task-results'].data[0]?.id;
    if (!stage || !resultId) throw new Error(`the run has no task stage with a result: ${run.text}`);
    const em = g.h.orm.em.fork();
    const outcome = em.create(TaskResultOutcome, {
      id: newId('taskResultOutcome'),
      taskResult: resultId,
      outcomeId: 'isolation-outcome',
      description: 'isolation outcome',
      body: 'isolation body',
      url: 'https://example.test/isolation',
      tags: {},
    });
    // A delivery attempt of that result, so its delivery-attempts route has something to hide.
    em.create(DeliveryAttempt, {
      taskResult: resultId,
      attempt: 1,
      startedAt: new Date(),
      durationMs: 12,
      httpStatus: 200,
      errorKind: null,
      responseExcerpt: 'isolation',
    });
    await em.flush();
    // Configuration versions in A's workspace, through the API: one with a real archive (uploaded through
    // its URL, so the download route has data), one whose URL expired, and one still pending.
    const createVersion = async (): Promise<{ id: string; token: string }> => {
      const res = await api(g.h, 'post', `/workspaces/${g.a.workspaceId}/configuration-versions`, g.a.organizationToken, {
        data: { type: 'configuration-versions', attributes: { 'auto-queue-runs': false } },
      });
      if (res.status !== 201) throw new Error(`create configuration version: ${res.status} ${res.text}`);
      const url = new URL(String(res.body.data.attributes['upload-url']));
      const token = url.pathname.slice(uploadPath('').length);
      if (url.pathname !== uploadPath(token) || token.length === 0) throw new Error(`unexpected upload URL ${url.href}`);
      return { id: res.body.data.id as string, token };
    };
    g.archive = configurationArchive('resource "null_resource" "isolation" {}\n');
    const uploadTo = async (token: string): Promise<void> => {
      const uploaded = await g.h.http.put(uploadPath(token)).set('Content-Type', 'application/octet-stream').send(g.archive);
      if (uploaded.status !== 200) throw new Error(`upload the archive: ${uploaded.status} ${uploaded.text}`);
    };
    // An archived version (archived once a newer one is uploaded): its URL is used up for good.
    const archived = await createVersion();
    await uploadTo(archived.token);
    const version = await createVersion();
    await uploadTo(version.token);
    const archiving = await api(g.h, 'post', `/configuration-versions/${archived.id}/actions/archive`, g.a.organizationToken);
    if (archiving.status !== 202) throw new Error(`archive a configuration version: ${archiving.status} ${archiving.text}`);
    g.usedUploadToken = archived.token;
    const expired = await createVersion();
    await em.execute(`update configuration_versions set upload_expires_at = now() - interval '1 second' where id = ?`, [expired.id]);
    g.expiredUploadToken = expired.token;
    const pending = await createVersion();
    g.pendingVersionId = pending.id;
    // A comment on A's run, so the comment routes have something to hide.
    const commentOn = async (id: string): Promise<string> => {
      const res = await api(g.h, 'post', `/runs/${id}/comments`, g.a.organizationToken, {
        data: { type: 'comments', attributes: { body: 'isolation' } },
      });
      if (res.status !== 201) throw new Error(`comment on A's run: ${res.status} ${res.text}`);
      return res.body.data.id as string;
    };
    // A tag on A's workspace, so the tag routes have something to hide.
    const tagged = await api(g.h, 'post', `/workspaces/${g.a.workspaceId}/relationships/tags`, g.a.organizationToken, {
      data: [{ type: 'tags', attributes: { name: 'isolation-tag' } }],
    });
    if (tagged.status !== 204) throw new Error(`tag A's workspace: ${tagged.status} ${tagged.text}`);
    const tags = await api(g.h, 'get', `/workspaces/${g.a.workspaceId}/relationships/tags`, g.a.organizationToken);
    // A notification configuration of A's workspace (disabled: saved without a verification).
    const notification = await api(g.h, 'post', `/workspaces/${g.a.workspaceId}/notification-configurations`, g.a.organizationToken, {
      data: { type: 'notification-configurations', attributes: { name: 'isolation', 'destination-type': 'generic', url: taskServer.url } },
    });
    if (notification.status !== 201) throw new Error(`notification configuration of A: ${notification.status} ${notification.text}`);
    const commentId = await commentOn(runId);
    const [runEvent] = await em.execute<{ id: string }[]>(`select id from run_events where comment_id = ?`, [commentId]);
    // A person invited to A, so the people routes have a user and a membership to hide.
    const invited = await api(g.h, 'post', `/organizations/${ORG_A}/organization-memberships`, g.a.organizationToken, {
      data: { type: 'organization-memberships', attributes: { email: 'isolation-member@example.test' } },
    });
    if (invited.status !== 201) throw new Error(`invite to A: ${invited.status} ${invited.text}`);
    // A CI trust rule of A's workspace, so the rule routes have something to hide.
    const rule = await api(g.h, 'post', `/workspaces/${g.a.workspaceId}/ci-trust-rules`, g.a.organizationToken, {
      data: {
        type: 'ci-trust-rules',
        attributes: { issuer: 'https://token.actions.githubusercontent.com', claims: { repository: 'isolation/app' } },
      },
    });
    if (rule.status !== 201) throw new Error(`create a CI trust rule: ${rule.status} ${rule.text}`);
    g.real = {
      organization_name: ORG_A,
      workspace_name: `${ORG_A}-ws`,
      workspace_id: g.a.workspaceId,
      team_id: g.a.teamId,
      id: teamWorkspaceId,
      run_id: runId,
      plan_id: run.body.data.relationships.plan.data.id as string,
      apply_id: run.body.data.relationships.apply.data.id as string,
      task_id: taskId,
      workspace_task_id: association.body.data.id as string,
      task_stage_id: stage.id,
      task_result_id: resultId,
      outcome_id: outcome.id,
      configuration_version_id: version.id,
      token_id: (await api(g.h, 'get', `/organizations/${ORG_A}/authentication-token`, g.a.organizationToken)).body.data.id as string,
      comment_id: commentId,
      run_event_id: runEvent?.id ?? '',
      tag_id: tags.body.data[0].id as string,
      configuration_id: notification.body.data.id as string,
      user_id: invited.body.data.relationships.user.data.id as string,
      organization_membership_id: invited.body.data.id as string,
      rule_id: rule.body.data.id as string,
      upload_token: pending.token,
    };
    // Organization B's own task result, with a live access token as the worker would give it.
    const otherTask = await api(g.h, 'post', `/organizations/${ORG_B}/tasks`, g.b.organizationToken, {
      data: { type: 'tasks', attributes: { name: 'isolation-task', url: taskServer.url, category: 'task' } },
    });
    if (otherTask.status !== 201) throw new Error(`create B's run task: ${otherTask.status} ${otherTask.text}`);
    const otherAssociation = await api(g.h, 'post', `/workspaces/${g.b.workspaceId}/tasks`, g.b.organizationToken, {
      data: {
        type: 'workspace-tasks',
        attributes: { 'enforcement-level': 'advisory' },
        relationships: { task: { data: { type: 'tasks', id: otherTask.body.data.id } } },
      },
    });
    if (otherAssociation.status !== 201) throw new Error(`associate B's run task: ${otherAssociation.status} ${otherAssociation.text}`);
    const otherRun = await createRun(g.h, g.b.organizationToken, g.b.workspaceId, { message: 'isolation' });
    g.otherTaskToken = generateToken(CALLBACK_TOKEN_PREFIX);
    const [marked] = await em.execute<{ id: string }[]>(
      `update task_results set callback_token_hash = ?
        where task_stage_id in (select id from task_stages where run_id = ?) returning id`,
      [g.h.secrets.hashToken(g.otherTaskToken), otherRun],
    );
    if (!marked) throw new Error("B's run has no task result");
    // Two more runs in A, each with a live task access token: one on the configuration version, one not.
    const liveTaskToken = async (configurationVersionId?: string): Promise<string> => {
      const res = await api(g.h, 'post', '/runs', g.a.organizationToken, {
        data: {
          type: 'runs',
          attributes: { message: 'isolation' },
          relationships: {
            workspace: { data: { type: 'workspaces', id: g.a.workspaceId } },
            ...(configurationVersionId
              ? { 'configuration-version': { data: { type: 'configuration-versions', id: configurationVersionId } } }
              : {}),
          },
        },
      });
      if (res.status !== 201) throw new Error(`create A's run: ${res.status} ${res.text}`);
      const token = generateToken(CALLBACK_TOKEN_PREFIX);
      const [row] = await em.execute<{ id: string }[]>(
        `update task_results set callback_token_hash = ?
          where task_stage_id in (select id from task_stages where run_id = ?) returning id`,
        [g.h.secrets.hashToken(token), res.body.data.id],
      );
      if (!row) throw new Error("A's run has no task result");
      return token;
    };
    g.versionTaskToken = await liveTaskToken(version.id);
    g.plainTaskToken = await liveTaskToken();
    // A remote state consumer of A's workspace, so the consumer routes have a link to keep.
    const consumer = await createWorkspace(g.h, ORG_A, g.a.organizationToken, `${ORG_A}-consumer`);
    const consumers = await api(g.h, 'post', `/workspaces/${g.a.workspaceId}/relationships/remote-state-consumers`, g.a.organizationToken, {
      data: [{ type: 'workspaces', id: consumer }],
    });
    if (consumers.status !== 204) throw new Error(`add a remote state consumer: ${consumers.status} ${consumers.text}`);
    g.taskRequestsBefore = taskServer.requests;
    g.notFoundText = (await api(g.h, 'get', `/workspaces/${MISSING.workspace_id}`, g.a.organizationToken)).text;
    g.unauthorizedText = (await api(g.h, 'get', '/organizations')).text;
    g.stateBefore = await snapshot();
  });

  afterAll(async () => {
    await g.h?.close();
    g.server?.closeAllConnections();
    await new Promise<void>((resolve) => (g.server ? g.server.close(() => resolve()) : resolve()));
  });

  return Object.assign(g, calls);
}

export type IsolationContext = ReturnType<typeof useIsolation>;
