import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startRunTaskServer, type RunTaskServer } from '../../../examples/run-task-server/server.ts';
import { uniqueName } from '../../../test/support/assertions.ts';
import {
  api,
  attachTask,
  createRun,
  createTask,
  createWorkspace,
  eventually,
  seedOrganization,
  type Fixture,
} from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import {
  startNotificationReceiver,
  type NotificationReceiver,
  type ReceivedNotification,
} from '../../../test/support/notification-receiver.ts';
import { opensslHmac } from '../../../test/support/signatures.ts';
import { startSmtpReceiver, type ReceivedMail } from '../../../test/support/smtp-receiver.ts';
import { nativePool, type DeliveryResponse } from '@runtasks/shared/db';
import { deliveryResponsesOf } from '@runtasks/shared/notifications';
import { startWorker, type RunningWorker } from '../src/worker.ts';

/**
 * Notifications end to end: the API and a worker on real PostgreSQL and Redis, a real task server
 * that fails its mandatory task, webhook receivers (generic, Slack-shaped, Teams-shaped) and a real
 * SMTP server on loopback. Short retry delays (NOTIFICATION_RETRY_DELAYS_SECONDS) keep the outage short.
 */
describe('notifications: what runs tell, delivered by the worker', () => {
  let h: Harness;
  let worker: RunningWorker;
  let smtp: Awaited<ReturnType<typeof startSmtpReceiver>>;
  let org: Fixture;
  let failing: RunTaskServer;
  const receivers: NotificationReceiver[] = [];

  beforeAll(async () => {
    smtp = await startSmtpReceiver();
    h = await startHarness({
      reachableBaseUrl: true,
      env: {
        SWEEPER_INTERVAL_SECONDS: '0.5',
        TASK_RETRY_DELAYS_SECONDS: '0.2,0.2',
        NOTIFICATION_RETRY_DELAYS_SECONDS: '0.3,0.5,0.5,1,1,1,1,1,1,1',
        SMTP_URL: smtp.url,
        SMTP_FROM: 'runtasks <notify@runtasks.test>',
      },
    });
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
    org = await seedOrganization(h, uniqueName('notify'));
    const overrides = await api(h, 'patch', `/organizations/${org.organization}`, org.organizationToken, {
      data: { type: 'organizations', attributes: { 'task-overrides-enabled': true } },
    });
    expect(overrides.status).toBe(200);
    failing = await startRunTaskServer({ result: 'failed', readPlan: false });
  });
  afterAll(async () => {
    await worker?.close();
    await failing?.close();
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await smtp?.close();
    await h?.close();
  });

  const receiver = async (): Promise<NotificationReceiver> => {
    const started = await startNotificationReceiver();
    receivers.push(started);
    return started;
  };
  const configure = async (workspaceId: string, attributes: Record<string, unknown>): Promise<string> => {
    const created = await api(h, 'post', `/workspaces/${workspaceId}/notification-configurations`, org.organizationToken, {
      data: { type: 'notification-configurations', attributes: { name: uniqueName('n'), enabled: true, ...attributes } },
    });
    expect([created.status, created.text.includes('"token":null')]).toEqual([201, true]);
    return created.body.data.id as string;
  };
  const runStatus = async (runId: string): Promise<string> =>
    (await api(h, 'get', `/runs/${runId}`, org.organizationToken)).body.data.attributes.status as string;
  const ofTrigger = (receiver: NotificationReceiver, trigger: string): ReceivedNotification[] =>
    receiver.received.filter((request) => request.raw.toString('utf8').includes(trigger));
  const deliveries = (runId: string) =>
    h.orm.em
      .fork()
      .getConnection()
      .execute<{ trigger: string; status: string; attempts: number }[]>(
        `select trigger, status, attempts from notification_deliveries where run_id = ? order by trigger`,
        [runId],
      );

  it('tells every destination that a failed mandatory task awaits an override, naming the run and the task', async () => {
    const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('ws'));
    await attachTask(h, org, workspaceId, await createTask(h, org, `${failing.url}/run-task`, { name: 'policy-scan' }), 'mandatory', [
      'post_plan',
    ]);
    const [generic, slack, teams, disabled] = [await receiver(), await receiver(), await receiver(), await receiver()];
    const triggers = ['run:needs_attention', 'run:errored'];
    const genericId = await configure(workspaceId, { 'destination-type': 'generic', url: generic.url, token: 'notify-secret', triggers });
    await configure(workspaceId, { 'destination-type': 'slack', url: slack.url, triggers });
    await configure(workspaceId, { 'destination-type': 'microsoft-teams', url: teams.url, triggers });
    await configure(workspaceId, { 'destination-type': 'generic', url: disabled.url, triggers, enabled: false });
    await configure(workspaceId, { 'destination-type': 'email', 'email-addresses': ['oncall@example.com'], triggers });

    const runId = await createRun(h, org.organizationToken, workspaceId, { message: 'notify me' });
    const [request] = await eventually(async () => {
      const found = ofTrigger(generic, 'run:needs_attention');
      return found.length > 0 ? found : undefined;
    }, 20_000);
    expect(await runStatus(runId)).toBe('post_plan_awaiting_decision');
    expect(request?.body).toEqual({
      payload_version: 1,
      notification_configuration_id: genericId,
      run_url: `${h.config.publicBaseUrl}/app/${org.organization}/workspaces/${(await api(h, 'get', `/workspaces/${workspaceId}`, org.organizationToken)).body.data.attributes.name}/runs/${runId}`,
      run_id: runId,
      run_message: 'notify me',
      run_created_at: expect.stringMatching(/Z$/),
      run_created_by: expect.any(String),
      workspace_id: workspaceId,
      workspace_name: expect.any(String),
      organization_name: org.organization,
      notifications: [
        {
          message: expect.stringContaining('mandatory task policy-scan failed at post-plan'),
          trigger: 'run:needs_attention',
          run_status: 'post_plan_awaiting_decision',
          run_updated_at: expect.stringMatching(/Z$/),
          run_updated_by: expect.any(String),
        },
      ],
    });
    expect(request?.headers['x-tfe-notification-signature']).toBe(opensslHmac('notify-secret', request?.raw ?? Buffer.alloc(0)));

    const [slackMessage] = await eventually(async () =>
      ofTrigger(slack, 'run:needs_attention').length > 0 ? ofTrigger(slack, 'run:needs_attention') : undefined,
    );
    expect(slackMessage?.headers['x-tfe-notification-signature']).toBeUndefined();
    expect(slackMessage?.body['text']).toContain('Run Needs Attention');
    const blocks = slackMessage?.body['blocks'] as { type: string; text?: { text: string } }[];
    expect(blocks[0]).toMatchObject({ type: 'header', text: { type: 'plain_text' } });
    expect(blocks.map((block) => block.text?.text ?? '').join('\n')).toContain('policy-scan (mandatory, post-plan): failed');

    const [teamsMessage] = await eventually(async () =>
      ofTrigger(teams, 'run:needs_attention').length > 0 ? ofTrigger(teams, 'run:needs_attention') : undefined,
    );
    const card = (teamsMessage?.body['attachments'] as { contentType: string; content: Record<string, unknown> }[])[0];
    expect(teamsMessage?.body['type']).toBe('message');
    expect(card?.contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(card?.content).toMatchObject({ type: 'AdaptiveCard', version: '1.4' });
    expect(JSON.stringify(card?.content)).toContain(runId);

    const mail: ReceivedMail = await eventually(async () => smtp.received.find((message) => message.raw.includes(runId)));
    expect(mail.to).toEqual(['oncall@example.com']);
    expect(mail.from).toBe('notify@runtasks.test');
    expect(mail.raw).toMatch(/Subject: .*Run Needs Attention/);
    expect(mail.raw).toContain('text/plain');
    expect(mail.raw).toContain('text/html');
    expect(mail.raw).toContain('policy-scan (mandatory, post-plan): failed');

    // Nothing for the disabled configuration (not even a verification), and each notice once per configuration.
    expect(disabled.received).toEqual([]);
    // Recorded as delivered once each answer is in (the receiver sees the request a moment before).
    const settled = await eventually(async () => {
      const rows = await deliveries(runId);
      return rows.every((row) => row.status === 'delivered') ? rows : undefined;
    });
    expect(settled.map((row) => [row.trigger, row.status, row.attempts])).toEqual(Array(4).fill(['run:needs_attention', 'delivered', 1]));
    expect(ofTrigger(generic, 'run:needs_attention')).toHaveLength(1);
  });

  it('delivers each notice exactly once to a destination that was down, and the run is not slowed by it', async () => {
    const workspaceId = await createWorkspace(h, org.organization, org.organizationToken, uniqueName('ws'));
    const flaky = await receiver();
    const configurationId = await configure(workspaceId, {
      'destination-type': 'generic',
      url: flaky.url,
      triggers: ['run:created', 'run:completed'],
    });
    await flaky.down();
    const runId = await createRun(h, org.organizationToken, workspaceId, { 'auto-apply': true });
    // The run finishes while its destination is down.
    await eventually(async () => ((await runStatus(runId)) === 'applied' ? true : undefined), 20_000);
    expect(flaky.received.filter((request) => request.body['run_id'] === runId)).toEqual([]);
    await eventually(async () => ((await deliveries(runId)).some((row) => row.attempts >= 2) ? true : undefined), 20_000);
    await flaky.up();
    const delivered = await eventually(async () => {
      const rows = await deliveries(runId);
      return rows.length === 2 && rows.every((row) => row.status === 'delivered') ? rows : undefined;
    }, 20_000);
    // Every attempt's answer kept on the configuration, the latest first (the two that got through), at
    // most ten; the oldest is the verification's at creation, before the destination went down.
    // As the API shows them: the deliveries keep their answers, the configuration its verification's.
    const [configuration] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ id: string; deliveryResponses: DeliveryResponse[] }[]>(
        `select id, delivery_responses as "deliveryResponses" from notification_configurations where id = ?`,
        [configurationId],
      );
    const kept = (await deliveryResponsesOf(await nativePool(h.orm.em), configuration ? [configuration] : [])).get(configurationId);
    const attempts = delivered.reduce((sum, row) => sum + row.attempts, 0);
    expect(kept?.map((response) => response.successful)).toEqual(
      ['true', 'true', ...Array<string>(attempts - 2).fill('false'), 'true'].slice(0, 10),
    );
    expect(ofTrigger(flaky, 'run:created')).toHaveLength(1);
    expect(ofTrigger(flaky, 'run:completed')).toHaveLength(1);
    // Whatever re-drive or duplicate job comes later finds the deliveries done: a sweep or two later, still once each.
    const sweeps = async () => (await worker.queue.getJobCounts('completed')).completed ?? 0;
    const before = await sweeps();
    await eventually(async () => ((await sweeps()) >= before + 3 ? true : undefined), 20_000);
    expect(flaky.received.filter((request) => request.body['run_id'] === runId)).toHaveLength(2);
    // Every notification job (the notices', the retries') ran on the notifications' own queue, none on the runs'.
    const states = ['completed', 'failed', 'active', 'waiting', 'delayed'] as const;
    const names = async (queue: typeof worker.queue) => new Set((await queue.getJobs([...states])).map((job) => job.name));
    expect([...(await names(worker.notificationQueue))].sort()).toEqual(['notification.deliver', 'notification.run']);
    expect([...(await names(worker.queue))].filter((name) => name.startsWith('notification.'))).toEqual([]);
  });
});
