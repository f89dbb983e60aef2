import { createHmac } from 'node:crypto';
import type { NoticeTask } from '../domain/notifications.ts';

/** What a notification tells, whatever its destination: HCP's generic payload's fields, and the run's task results. */
export interface NotificationFacts {
  configurationId: string;
  runUrl: string | null;
  runId: string | null;
  runMessage: string | null;
  runCreatedAt: string | null;
  runCreatedBy: string | null;
  workspaceId: string | null;
  workspaceName: string | null;
  organizationName: string | null;
  message: string;
  trigger: string;
  runStatus: string | null;
  runUpdatedAt: string | null;
  runUpdatedBy: string | null;
  /** The run's task results that explain the notice (failed, errored or unreachable ones), for people. */
  tasks: readonly NoticeTask[];
}

/** HCP's generic payload, version 1, exactly as it documents it (one notification per payload). */
export function genericPayload(facts: NotificationFacts): Record<string, unknown> {
  return {
    payload_version: 1,
    notification_configuration_id: facts.configurationId,
    run_url: facts.runUrl,
    run_id: facts.runId,
    run_message: facts.runMessage,
    run_created_at: facts.runCreatedAt,
    run_created_by: facts.runCreatedBy,
    workspace_id: facts.workspaceId,
    workspace_name: facts.workspaceName,
    organization_name: facts.organizationName,
    notifications: [
      {
        message: facts.message,
        trigger: facts.trigger,
        run_status: facts.runStatus,
        run_updated_at: facts.runUpdatedAt,
        run_updated_by: facts.runUpdatedBy,
      },
    ],
  };
}

/** HCP's verification ("send a test"): the generic payload's keys, run, workspace and organization null. */
export function verificationFacts(configurationId: string, name: string): NotificationFacts {
  return {
    configurationId,
    runUrl: null,
    runId: null,
    runMessage: null,
    runCreatedAt: null,
    runCreatedBy: null,
    workspaceId: null,
    workspaceName: null,
    organizationName: null,
    message: `Verification of ${name}`,
    trigger: 'verification',
    runStatus: null,
    runUpdatedAt: null,
    runUpdatedBy: null,
    tasks: [],
  };
}

/** `X-TFE-Notification-Signature`: lowercase hex HMAC-SHA512 of the exact body, keyed by the configuration's token. */
export function notificationSignature(body: Buffer, token: string): string {
  return createHmac('sha512', token).update(body).digest('hex');
}

const where = (facts: NotificationFacts): string =>
  facts.workspaceName ? `${facts.organizationName ?? ''}/${facts.workspaceName}` : 'runtasks';

const taskLine = (task: NoticeTask): string =>
  `${task.name} (${task.enforcement}, ${task.stage.replace('_', '-')}): ${task.status}${task.message ? ` - ${task.message}` : ''}`;

/** A Slack incoming-webhook message: Block Kit blocks, with `text` as the fallback Slack shows in notifications. */
export function slackPayload(facts: NotificationFacts): Record<string, unknown> {
  const runLink = facts.runUrl && facts.runId ? `<${facts.runUrl}|${facts.runId}>` : (facts.runId ?? 'no run');
  const blocks: Record<string, unknown>[] = [
    { type: 'header', text: { type: 'plain_text', text: facts.message.slice(0, 150) } },
    {
      type: 'section',
      text: { type: 'mrkdwn', text: `*${where(facts)}* · run ${runLink}\n${facts.message}` },
      fields: [
        { type: 'mrkdwn', text: `*Trigger*\n${facts.trigger}` },
        { type: 'mrkdwn', text: `*Status*\n${facts.runStatus ?? '-'}` },
      ],
    },
  ];
  if (facts.tasks.length > 0) {
    blocks.push({
      type: 'section',
      text: { type: 'mrkdwn', text: `*Run tasks*\n${facts.tasks.map((task) => `• ${taskLine(task)}`).join('\n')}` },
    });
  }
  if (facts.runUrl) {
    blocks.push({ type: 'actions', elements: [{ type: 'button', text: { type: 'plain_text', text: 'View run' }, url: facts.runUrl }] });
  }
  return { text: `${where(facts)}: ${facts.message}`, blocks };
}

/** A Microsoft Teams message (Workflows / incoming webhook): one Adaptive Card 1.4 attachment. */
export function teamsPayload(facts: NotificationFacts): Record<string, unknown> {
  const facts_ = [
    { title: 'Workspace', value: where(facts) },
    { title: 'Run', value: facts.runId ?? '-' },
    { title: 'Trigger', value: facts.trigger },
    { title: 'Status', value: facts.runStatus ?? '-' },
    ...facts.tasks.map((task) => ({ title: `Task ${task.name}`, value: taskLine(task) })),
  ];
  return {
    type: 'message',
    attachments: [
      {
        contentType: 'application/vnd.microsoft.card.adaptive',
        contentUrl: null,
        content: {
          $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
          type: 'AdaptiveCard',
          version: '1.4',
          body: [
            { type: 'TextBlock', size: 'Medium', weight: 'Bolder', text: facts.message, wrap: true },
            { type: 'FactSet', facts: facts_ },
          ],
          actions: facts.runUrl ? [{ type: 'Action.OpenUrl', title: 'View run', url: facts.runUrl }] : [],
        },
      },
    ],
  };
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);

/** An email's subject, plain text and HTML parts. */
export function emailMessage(facts: NotificationFacts): { subject: string; text: string; html: string } {
  const lines = [
    facts.message,
    '',
    `Workspace: ${where(facts)}`,
    `Run: ${facts.runId ?? '-'}${facts.runMessage ? ` (${facts.runMessage})` : ''}`,
    `Trigger: ${facts.trigger}`,
    `Status: ${facts.runStatus ?? '-'}`,
    ...(facts.tasks.length > 0 ? ['', 'Run tasks:', ...facts.tasks.map((task) => `- ${taskLine(task)}`)] : []),
    ...(facts.runUrl ? ['', `View the run: ${facts.runUrl}`] : []),
  ];
  const rows = [
    ['Workspace', where(facts)],
    ['Run', facts.runId ?? '-'],
    ['Trigger', facts.trigger],
    ['Status', facts.runStatus ?? '-'],
  ]
    .map(([label, value]) => `<tr><th align="left">${escapeHtml(label ?? '')}</th><td>${escapeHtml(value ?? '')}</td></tr>`)
    .join('');
  const tasks =
    facts.tasks.length > 0
      ? `<h3>Run tasks</h3><ul>${facts.tasks.map((task) => `<li>${escapeHtml(taskLine(task))}</li>`).join('')}</ul>`
      : '';
  const link = facts.runUrl ? `<p><a href="${escapeHtml(facts.runUrl)}">View the run</a></p>` : '';
  return {
    subject: `[runtasks] ${where(facts)}: ${facts.message}`.slice(0, 200),
    text: `${lines.join('\n')}\n`,
    html: `<!doctype html><html><body><h2>${escapeHtml(facts.message)}</h2><table>${rows}</table>${tasks}${link}</body></html>`,
  };
}
