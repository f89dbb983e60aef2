import type { RunStatus } from './statuses.ts';

/** Where a notification configuration sends (HCP's `destination-type`). */
export const NOTIFICATION_DESTINATION_TYPES = ['generic', 'slack', 'microsoft-teams', 'email'] as const;
export type NotificationDestinationType = (typeof NOTIFICATION_DESTINATION_TYPES)[number];

/** The destination types that POST to a URL (a URL is required for them). */
export const WEBHOOK_DESTINATION_TYPES: ReadonlySet<NotificationDestinationType> = new Set(['generic', 'slack', 'microsoft-teams']);

/** The run triggers this service sends; HCP's workspace triggers go-tfe v1.90.0 accepts, of which the others are never sent here. */
export const RUN_NOTIFICATION_TRIGGERS = [
  'run:created',
  'run:planning',
  'run:needs_attention',
  'run:applying',
  'run:completed',
  'run:errored',
] as const;
export type RunNotificationTrigger = (typeof RUN_NOTIFICATION_TRIGGERS)[number];

/** Every trigger a workspace's configuration may subscribe to (HCP's workspace set; assessments and auto-destroy are accepted, never sent). */
export const WORKSPACE_NOTIFICATION_TRIGGERS = [
  ...RUN_NOTIFICATION_TRIGGERS,
  'assessment:drifted',
  'assessment:check_failure',
  'assessment:failed',
  'workspace:auto_destroy_reminder',
  'workspace:auto_destroy_run_results',
] as const;

/** A team's configuration may subscribe to change requests only (HCP's team set); accepted, never sent: there are no change requests here. */
export const TEAM_NOTIFICATION_TRIGGERS = ['change_request:created'] as const;

/** Every trigger any configuration may name; which ones a configuration may take depends on its subscribable. */
export const NOTIFICATION_TRIGGERS = [...WORKSPACE_NOTIFICATION_TRIGGERS, ...TEAM_NOTIFICATION_TRIGGERS] as const;
export type NotificationTrigger = (typeof NOTIFICATION_TRIGGERS)[number];

/** What a configuration belongs to (HCP's `subscribable` relationship types). */
export type NotificationSubscribableType = 'workspaces' | 'teams';

const TRIGGERS_OF: Record<NotificationSubscribableType, readonly NotificationTrigger[]> = {
  workspaces: WORKSPACE_NOTIFICATION_TRIGGERS,
  teams: TEAM_NOTIFICATION_TRIGGERS,
};

/** At most this many configurations per workspace, and per team (HCP's limit). */
export const MAX_NOTIFICATION_CONFIGURATIONS = 20;
/** How many delivery responses a configuration keeps (the latest first). */
export const DELIVERY_RESPONSES_KEPT = 10;

/**
 * A configuration's `delivery-responses` from where its answers are kept (each list the latest first:
 * its deliveries' rows, and its own column for verifications and answers kept before): the latest
 * first by `sent-at`, at most DELIVERY_RESPONSES_KEPT. Answers sent at the same instant keep the
 * order of the lists.
 */
export function mergeDeliveryResponses<T extends { 'sent-at': string }>(lists: readonly (readonly T[])[]): T[] {
  // An unreadable time counts as the oldest.
  const all = lists.flatMap((list) => list.map((response) => ({ response, at: Date.parse(response['sent-at']) || 0 })));
  // A stable sort: ties keep the lists' order.
  all.sort((a, b) => b.at - a.at);
  return all.slice(0, DELIVERY_RESPONSES_KEPT).map((entry) => entry.response);
}

/** What the trigger rule reads of a run. */
export interface NotifiedRun {
  autoApply: boolean;
  planOnly: boolean;
}

/** A status change that is worth telling: the trigger, and the occasion that keys it (one delivery per configuration, run and key). */
export interface RunNotice {
  trigger: RunNotificationTrigger;
  /**
   * What makes two notices of one trigger distinct: a run may need attention more than once (a task
   * stage awaiting an override, then the confirmation), so that trigger is keyed by the status; every
   * other trigger happens once per run.
   */
  occasion: string;
}

const AWAITING_DECISION: ReadonlySet<RunStatus> = new Set([
  'pre_plan_awaiting_decision',
  'post_plan_awaiting_decision',
  'pre_apply_awaiting_decision',
]);
/** A run whose plan is done stops here for a confirmation unless it applies by itself or cannot apply. */
const AWAITING_CONFIRMATION: ReadonlySet<RunStatus> = new Set(['planned', 'post_plan_completed']);
const COMPLETED: ReadonlySet<RunStatus> = new Set(['applied', 'planned_and_finished', 'post_apply_completed']);
/** HCP's run:errored covers a run ended early by an error or by a cancellation. */
const ERRORED: ReadonlySet<RunStatus> = new Set(['errored', 'canceled']);

/**
 * Every status a change to may give a notice (runNotice of a change that is not the run's creation):
 * the runs' trigger records only changes to these (RUN_NOTIFY_STATUS_WHEN), so a run's other statuses
 * cost it no outbox event, job or read.
 */
export const NOTICE_STATUSES: readonly RunStatus[] = [
  'planning',
  'applying',
  ...AWAITING_DECISION,
  ...AWAITING_CONFIRMATION,
  ...COMPLETED,
  ...ERRORED,
];

/**
 * The notice a run's status change gives, or null. `from` is null at the run's creation. A status a
 * run only passes through (planned on its way to post-plan tasks) is filtered by the worker, which
 * tells it only while the run still waits there.
 */
export function runNotice(from: RunStatus | null, to: RunStatus, run: NotifiedRun): RunNotice | null {
  if (from === null) return { trigger: 'run:created', occasion: '' };
  if (from === to) return null;
  if (to === 'planning') return { trigger: 'run:planning', occasion: '' };
  if (to === 'applying') return { trigger: 'run:applying', occasion: '' };
  if (AWAITING_DECISION.has(to)) return { trigger: 'run:needs_attention', occasion: to };
  if (AWAITING_CONFIRMATION.has(to) && !run.autoApply && !run.planOnly) return { trigger: 'run:needs_attention', occasion: 'confirmation' };
  if (COMPLETED.has(to)) return { trigger: 'run:completed', occasion: '' };
  if (ERRORED.has(to)) return { trigger: 'run:errored', occasion: '' };
  return null;
}

/**
 * The notice a change gives as the worker can tell it before reading the run: the trigger and occasion,
 * and whether it holds only for a run waiting for its confirmation (neither auto-applied nor plan-only,
 * and still in `to`: a run only passes through `planned` on its way to post-plan tasks), which the
 * statement that records its deliveries checks against the run. Null: no notice, whatever the run.
 */
export function noticeOfChange(
  from: RunStatus | null,
  to: RunStatus,
): { notice: RunNotice; onlyWhileAwaitingConfirmation: boolean } | null {
  // Only a wait for confirmation depends on the run; any other notice is the same for every run.
  const always = runNotice(from, to, { autoApply: true, planOnly: true });
  if (always) return { notice: always, onlyWhileAwaitingConfirmation: false };
  const awaiting = runNotice(from, to, { autoApply: false, planOnly: false });
  return awaiting ? { notice: awaiting, onlyWhileAwaitingConfirmation: true } : null;
}

const STATUS_WORDS: Partial<Record<RunStatus, string>> = {
  pending: 'Run Created',
  planning: 'Run Planning',
  applying: 'Run Applying',
  applied: 'Run Applied',
  post_apply_completed: 'Run Applied',
  planned_and_finished: 'Run Planned and Finished',
  errored: 'Run Errored',
  canceled: 'Run Canceled',
};

/** A task result that explains a notice: which task, at which stage, how enforced, and how it ended. */
export interface NoticeTask {
  name: string;
  stage: string;
  enforcement: string;
  status: string;
  message: string;
}

/** Results that explain a run needing attention or erroring: failed, errored or unreachable, mandatory first. */
export function explainingTasks(tasks: readonly NoticeTask[]): NoticeTask[] {
  return tasks
    .filter((task) => task.status === 'failed' || task.status === 'errored' || task.status === 'unreachable')
    .sort((a, b) => (a.enforcement === b.enforcement ? 0 : a.enforcement === 'mandatory' ? -1 : 1));
}

const describeTask = (task: NoticeTask): string =>
  `${task.enforcement} task ${task.name} ${task.status} at ${task.stage.replace('_', '-')}${task.message ? ` (${task.message})` : ''}`;

/**
 * The notification's `message`, in HCP's words ("Run Needs Attention", "Run Errored", ...), with the
 * run task reasons after them: which task, which stage, mandatory or advisory, and what it said.
 */
export function noticeMessage(notice: RunNotice, status: RunStatus, tasks: readonly NoticeTask[]): string {
  const head = notice.trigger === 'run:needs_attention' ? 'Run Needs Attention' : (STATUS_WORDS[status] ?? `Run ${status}`);
  const reasons = notice.trigger === 'run:needs_attention' || notice.trigger === 'run:errored' ? explainingTasks(tasks) : [];
  const waiting =
    notice.trigger !== 'run:needs_attention'
      ? ''
      : notice.occasion === 'confirmation'
        ? ': the plan awaits confirmation'
        : ': a task stage awaits an override';
  if (reasons.length === 0) return `${head}${waiting}`;
  return `${head}${waiting}${waiting ? '; ' : ': '}${reasons.map(describeTask).join('; ')}`;
}

/** What the combination rules read of a configuration as it would be saved. */
export interface ConfigurationShape {
  subscribable: NotificationSubscribableType;
  triggers: readonly NotificationTrigger[];
  destinationType: NotificationDestinationType;
  url: string | null;
  emailAddresses: readonly string[];
  emailUserIds: readonly string[];
}

/** A rule a configuration breaks: where (a JSON pointer into the request) and why. */
export interface ConfigurationProblem {
  pointer: string;
  detail: string;
}

/**
 * HCP's rules across attributes (each attribute's own form is the request schema's): a workspace's
 * configuration takes workspace triggers, a team's team triggers; webhook types need a URL; email
 * recipients belong to email configurations only. The first problem, or null.
 */
export function configurationProblem(shape: ConfigurationShape): ConfigurationProblem | null {
  const allowed = TRIGGERS_OF[shape.subscribable];
  const misplaced = shape.triggers.findIndex((trigger) => !allowed.includes(trigger));
  if (misplaced >= 0) {
    const owner = shape.subscribable === 'teams' ? "a team's" : "a workspace's";
    return {
      pointer: `/data/attributes/triggers/${misplaced}`,
      detail: `${shape.triggers[misplaced] ?? ''} is not a trigger of ${owner} notification configuration; use one of ${allowed.join(', ')}`,
    };
  }
  const webhook = WEBHOOK_DESTINATION_TYPES.has(shape.destinationType);
  if (webhook && !shape.url)
    return { pointer: '/data/attributes/url', detail: `url is required for the ${shape.destinationType} destination type` };
  if (!webhook && shape.url)
    return { pointer: '/data/attributes/url', detail: 'url is not used by the email destination type; leave it out' };
  if (webhook && shape.emailAddresses.length > 0)
    return { pointer: '/data/attributes/email-addresses', detail: 'email-addresses are only used by the email destination type' };
  if (webhook && shape.emailUserIds.length > 0)
    return { pointer: '/data/relationships/users', detail: 'users are only used by the email destination type' };
  return null;
}
