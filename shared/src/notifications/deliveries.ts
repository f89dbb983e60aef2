import type { Pool } from 'pg';
import { prepared, runPrepared } from '../db/prepared.ts';
import { newId } from '../domain/ids.ts';
import { BatchWriter } from '../engine/batch-writer.ts';
import {
  DELIVERY_RESPONSES_KEPT,
  mergeDeliveryResponses,
  noticeMessage,
  noticeStillHolds,
  runNotice,
  type NoticeTask,
} from '../domain/notifications.ts';
import type { NotificationDestinationType } from '../domain/notifications.ts';
import type { RunStatus } from '../domain/statuses.ts';
import { statusTimestampKey } from '../domain/timestamps.ts';
import type { DeliveryResponse } from '../db/entities/notification-configuration.entity.ts';
import type { SecretBox } from '../security/secrets.ts';
import type { NotificationFacts } from './payloads.ts';
import { emailsOfUsers } from './users.ts';
import { sendNotification, type NotificationSenders, type SendOutcome } from './send.ts';

/**
 * The worker's half of notifications (docs/notifications.md, "Delivery"): a run's status change, taken
 * from the outbox, becomes one delivery row per interested configuration (the unique key makes a
 * repeated event or job a no-op), and each delivery is attempted under a lease, retried with backoff
 * on network errors, 429 and 5xx, and its answers kept on its row (its configuration's delivery-responses).
 */

/** How long an attempt holds its delivery: longer than any attempt lasts; a crashed one is re-driven after it. */
export const NOTIFICATION_LEASE_SECONDS = 60;

/** A configuration as the notice's read brings it: what deciding and sending need. */
interface ConfigurationFacts {
  id: string;
  triggers: string[];
  name: string;
  destination_type: NotificationDestinationType;
  url: string | null;
  token_encrypted: string | null;
  email_addresses: string[];
  email_user_ids: string[];
}

/** What a notice's payload says of its run, its workspace and its organization. */
interface RunPayloadColumns {
  run_message: string;
  run_created_at: Date;
  created_by: string | null;
  confirmed_by: string | null;
  workspace_id: string;
  workspace_name: string;
  organization_id: string;
  organization_name: string;
}

interface RunRow extends RunPayloadColumns {
  id: string;
  status: RunStatus;
  auto_apply: boolean;
  plan_only: boolean;
  status_timestamps: Record<string, string>;
  /** Its workspace's enabled configurations, with the triggers each wants and what sending to it needs. */
  configurations: ConfigurationFacts[];
}

/*
 * Every statement of deciding and delivering is prepared (parsed and planned once per connection), as
 * the run engine's hot statements are (docs/design.md, "Hot statements are prepared"): a run tells
 * each of its notices to every configuration, so they run several times per run.
 */
const TASKS_OF_RUN = prepared(
  'notification-tasks-of-run',
  `select tr.task_name as name, tr.stage, tr.enforcement_level as enforcement, tr.status, tr.message
     from task_results tr join task_stages ts on ts.id = tr.task_stage_id
    where ts.run_id = $1 order by tr.stage, tr.task_name`,
);
/**
 * The run, its workspace and organization, and the workspace's enabled configurations in one read (a
 * workspace has at most twenty): which of them want the notice is decided here, once the notice is
 * known, and what sending needs comes with them, so the deliveries it records are sent without
 * another read (RECORD_NOTICE records them claimed).
 */
const RUN_OF_NOTICE = prepared(
  'notification-run',
  `select r.id, r.status, r.auto_apply, r.plan_only, r.status_timestamps, r.message as run_message, r.created_at as run_created_at,
          r.created_by, r.confirmed_by, w.id as workspace_id, w.name as workspace_name, o.id as organization_id, o.name as organization_name,
          coalesce((select jsonb_agg(jsonb_build_object('id', c.id, 'triggers', c.triggers, 'name', c.name, 'destination_type', c.destination_type,
                                                        'url', c.url, 'token_encrypted', c.token_encrypted, 'email_addresses', c.email_addresses,
                                                        'email_user_ids', c.email_user_ids) order by c.created_at, c.id)
                      from notification_configurations c where c.workspace_id = r.workspace_id and c.enabled), '[]'::jsonb) as configurations
     from runs r join workspaces w on w.id = r.workspace_id join organizations o on o.id = w.organization_id
    where r.id = $1`,
);
/**
 * A row per configuration (the unique key makes a repeated event a no-op), recorded already claimed by
 * this pass (its first attempt counted and leased, as CLAIM does: a crash before it is sent is re-driven
 * after the lease), so that the usual notice writes each delivery twice (recorded, settled) rather than
 * three times; then the notice's deliveries a crashed earlier pass left pending and due (the table's
 * read does not see the CTE's rows), for CLAIM.
 */
const RECORD_NOTICE = prepared(
  'notification-record-notice',
  `with recorded as (
     insert into notification_deliveries (id, configuration_id, run_id, trigger, occasion, message, run_status, run_updated_at, status, attempts, due_at, created_at)
     select d.id, d.configuration_id, $3, $4, $5, $6, $7, coalesce($8::timestamptz, now()), 'pending', 1, now() + make_interval(secs => $9), now()
       from unnest($1::text[], $2::text[]) as d(id, configuration_id)
     on conflict (configuration_id, run_id, trigger, occasion) do nothing
     returning id, configuration_id, run_updated_at)
   select id, configuration_id, run_updated_at, true as claimed from recorded
   union all
   select id, configuration_id, run_updated_at, false from notification_deliveries
    where run_id = $3 and trigger = $4 and occasion = $5 and status = 'pending' and due_at <= now()`,
);

/** The run's task results, as the notice's words and the Slack/Teams/email summaries name them. */
async function tasksOf(pool: Pool, runId: string): Promise<NoticeTask[]> {
  const rows = await runPrepared<{ name: string; stage: string; enforcement: string; status: string; message: string | null }>(
    pool,
    TASKS_OF_RUN,
    [runId],
  );
  return rows.map((row) => ({ ...row, message: row.message ?? '' }));
}

/** What a notice left to send: deliveries it recorded claimed (with what sending needs), and ids of older ones still due, to claim. */
export interface NoticeDeliveries {
  claimed: DeliveryRow[];
  due: string[];
}

/**
 * Decides what a run's change from `from` to `status` tells, and records one delivery per enabled
 * configuration of its workspace subscribed to that trigger, claimed for the caller to attempt at once.
 * Also returns the ids of that notice's deliveries a crashed earlier pass left pending and due.
 */
export async function decideNotifications(pool: Pool, runId: string, status: RunStatus, from: RunStatus | null): Promise<NoticeDeliveries> {
  const none: NoticeDeliveries = { claimed: [], due: [] };
  const [run] = await runPrepared<RunRow>(pool, RUN_OF_NOTICE, [runId]);
  if (!run) return none;
  const notice = runNotice(from, status, { autoApply: run.auto_apply, planOnly: run.plan_only });
  if (!notice || !noticeStillHolds(notice, status, run.status)) return none;
  const configurations = run.configurations.filter((configuration) => configuration.triggers.includes(notice.trigger));
  if (configurations.length === 0) return none;
  // Only these triggers' messages name the run's tasks: the others need no read of them.
  const explained = notice.trigger === 'run:needs_attention' || notice.trigger === 'run:errored';
  const message = noticeMessage(notice, status, explained ? await tasksOf(pool, runId) : []);
  const updatedAt = run.status_timestamps[statusTimestampKey(status)] ?? null;
  const ids = configurations.map(() => newId('notificationDelivery'));
  const rows = await runPrepared<{ id: string; configuration_id: string; run_updated_at: Date; claimed: boolean }>(pool, RECORD_NOTICE, [
    ids,
    configurations.map((configuration) => configuration.id),
    runId,
    notice.trigger,
    notice.occasion,
    message,
    status,
    updatedAt,
    NOTIFICATION_LEASE_SECONDS,
  ]);
  const byId = new Map(configurations.map((configuration) => [configuration.id, configuration]));
  const claimed: DeliveryRow[] = [];
  const due: string[] = [];
  for (const row of rows) {
    const configuration = byId.get(row.configuration_id);
    if (!row.claimed || !configuration) {
      due.push(row.id);
      continue;
    }
    claimed.push({
      id: row.id,
      attempts: 1,
      trigger: notice.trigger,
      message,
      run_status: status,
      run_updated_at: row.run_updated_at,
      run_id: runId,
      configuration_id: configuration.id,
      name: configuration.name,
      destination_type: configuration.destination_type,
      url: configuration.url,
      token_encrypted: configuration.token_encrypted,
      enabled: true,
      email_addresses: configuration.email_addresses,
      email_user_ids: configuration.email_user_ids,
      run_message: run.run_message,
      run_created_at: run.run_created_at,
      created_by: run.created_by,
      confirmed_by: run.confirmed_by,
      workspace_id: run.workspace_id,
      workspace_name: run.workspace_name,
      organization_id: run.organization_id,
      organization_name: run.organization_name,
    });
  }
  return { claimed, due };
}

/** A delivery's last step: its answer kept on its row, and its row settled. */
export interface SettledDelivery {
  id: string;
  configurationId: string;
  /** The answer, as JSON. */
  response: string;
  status: 'delivered' | 'failed';
  error: string | null;
}

/**
 * A delivery's answers with `$response` (JSON text) put first, at most DELIVERY_RESPONSES_KEPT: an
 * expression over the row being updated (`responses` is null until its first answer, the usual case).
 * Kept on the delivery's own row, which the update rewrites anyway, not on its configuration's (a
 * row of up to ten answers rewritten at every delivery: Migration20261201200000DeliveryResponsesApart).
 */
const WITH_RESPONSE = (response: string): string => `case when responses is null then jsonb_build_array(${response}::jsonb) else (
    select jsonb_agg(e order by n) from (
      select e, n from jsonb_array_elements(jsonb_build_array(${response}::jsonb) || responses) with ordinality t(e, n)
       order by n limit ${DELIVERY_RESPONSES_KEPT}) kept) end`;

/** The last steps of many deliveries in one statement: each delivery settled, its answer kept on its row. */
const RECORD_AND_SETTLE_MANY = prepared(
  'notification-record-settle-many',
  `update notification_deliveries d
      set status = i.status, last_error = i.error, delivered_at = case when i.status = 'delivered' then now() end,
          responses = ${WITH_RESPONSE('i.response')}, answered_at = now()
     from unnest($1::text[], $2::text[], $3::text[], $4::text[]) as i(id, response, status, error)
    where d.id = i.id and d.status = 'pending'`,
);

/**
 * The answers of each configuration's latest answered deliveries (at most DELIVERY_RESPONSES_KEPT
 * deliveries each, by the partial index: enough, since each holds its latest answer), for
 * `delivery-responses` (mergeDeliveryResponses puts them in order with the configuration's own).
 */
const RESPONSES_OF_CONFIGURATIONS = `select c.id, d.responses
    from unnest($1::text[]) as c(id)
    cross join lateral (
      select responses from notification_deliveries
       where configuration_id = c.id and answered_at is not null order by answered_at desc limit ${DELIVERY_RESPONSES_KEPT}) d`;

/**
 * Each given configuration's `delivery-responses`: its deliveries' answers and those it holds itself
 * (verifications, and answers kept there before), the latest first, at most DELIVERY_RESPONSES_KEPT.
 */
export async function deliveryResponsesOf(
  pool: Pool,
  configurations: readonly { id: string; deliveryResponses: readonly DeliveryResponse[] }[],
): Promise<Map<string, DeliveryResponse[]>> {
  const lists = new Map<string, DeliveryResponse[][]>(configurations.map((configuration) => [configuration.id, []]));
  if (configurations.length > 0) {
    const rows = await pool.query<{ id: string; responses: DeliveryResponse[] }>(RESPONSES_OF_CONFIGURATIONS, [
      configurations.map((configuration) => configuration.id),
    ]);
    for (const row of rows.rows) lists.get(row.id)?.push(row.responses);
  }
  return new Map(
    configurations.map((configuration) => [
      configuration.id,
      mergeDeliveryResponses([...(lists.get(configuration.id) ?? []), configuration.deliveryResponses]),
    ]),
  );
}

/** The most deliveries one statement settles. */
const SETTLE_BATCH = 100;

/**
 * Settles deliveries as they end, together: those that end while a batch is being written go in the
 * next (no wait when idle). Under a burst a run's two deliveries, and other runs', share a statement
 * and its commit instead of one each. Each caller waits for its own to be written.
 */
export function deliverySettler(pool: Pool): (delivery: SettledDelivery) => Promise<void> {
  const writer = new BatchWriter<SettledDelivery>(async (items) => {
    await runPrepared(pool, RECORD_AND_SETTLE_MANY, [
      items.map((item) => item.id),
      items.map((item) => item.response),
      items.map((item) => item.status),
      items.map((item) => item.error),
    ]);
  }, SETTLE_BATCH);
  return (delivery) => writer.write(delivery);
}

/** What delivering needs: the senders, the secrets that open tokens, where run pages are, the retry schedule, and users' addresses. */
export interface DeliveryDeps {
  senders: NotificationSenders;
  secrets: SecretBox;
  publicBaseUrl: string;
  retryDelaysMs: readonly number[];
  /** Where a delivery's last step is written (deliverySettler, on the pool the attempts use). */
  settle: (delivery: SettledDelivery) => Promise<void>;
}

/** How an attempt left its delivery: done (delivered, failed, skipped, or not this attempt's), or to retry after a delay. */
export type DeliveryStep = { kind: 'done'; result: string } | { kind: 'retry'; attempt: number; delayMs: number };

/** A claimed delivery and what sending it needs. */
export interface DeliveryRow extends RunPayloadColumns {
  id: string;
  attempts: number;
  trigger: string;
  message: string;
  run_status: string;
  run_updated_at: Date;
  run_id: string;
  configuration_id: string;
  name: string;
  destination_type: NotificationDestinationType;
  url: string | null;
  token_encrypted: string | null;
  enabled: boolean;
  email_addresses: string[];
  email_user_ids: string[];
}

/** Claims the due pending deliveries of $1 (each attempt counted, leased) and reads what sending them needs; none that is not due or not pending. */
const CLAIM = prepared(
  'notification-claim',
  `with claimed as (
    update notification_deliveries set attempts = attempts + 1, due_at = now() + make_interval(secs => $2)
     where id = any($1::text[]) and status = 'pending' and due_at <= now()
     returning id, attempts, trigger, message, run_status, run_updated_at, run_id, configuration_id)
  select d.id, d.attempts, d.trigger, d.message, d.run_status, d.run_updated_at, d.run_id, d.configuration_id,
         c.name, c.destination_type, c.url, c.token_encrypted, c.enabled, c.email_addresses, c.email_user_ids,
         r.message as run_message, r.created_at as run_created_at, r.created_by, r.confirmed_by,
         w.id as workspace_id, w.name as workspace_name, o.id as organization_id, o.name as organization_name
    from claimed d join notification_configurations c on c.id = d.configuration_id
    join runs r on r.id = d.run_id join workspaces w on w.id = r.workspace_id join organizations o on o.id = w.organization_id`,
);

async function factsOf(pool: Pool, row: DeliveryRow, baseUrl: string): Promise<NotificationFacts> {
  const tasks = row.trigger === 'run:needs_attention' || row.trigger === 'run:errored' ? await tasksOf(pool, row.run_id) : [];
  return {
    configurationId: row.configuration_id,
    runUrl: `${baseUrl}/app/${row.organization_name}/workspaces/${row.workspace_name}/runs/${row.run_id}`,
    runId: row.run_id,
    runMessage: row.run_message,
    runCreatedAt: new Date(row.run_created_at).toISOString(),
    runCreatedBy: row.created_by,
    workspaceId: row.workspace_id,
    workspaceName: row.workspace_name,
    organizationName: row.organization_name,
    message: row.message,
    trigger: row.trigger,
    runStatus: row.run_status,
    runUpdatedAt: new Date(row.run_updated_at).toISOString(),
    runUpdatedBy: row.confirmed_by ?? row.created_by,
    tasks: tasks.filter((task) => task.status === 'failed' || task.status === 'errored' || task.status === 'unreachable'),
  };
}

/** The answer kept on the delivery's row and the delivery due again after the retry delay (in seconds). */
const RECORD_AND_RETRY = prepared(
  'notification-record-retry',
  `update notification_deliveries
      set due_at = now() + make_interval(secs => $3), last_error = $4, responses = ${WITH_RESPONSE('$2')}, answered_at = now()
    where id = $1 and status = 'pending'`,
);

const SETTLE = prepared(
  'notification-settle',
  `update notification_deliveries set status = $2, last_error = $3, delivered_at = case when $2 = 'delivered' then now() end where id = $1 and status = 'pending'`,
);

async function settle(pool: Pool, id: string, status: 'delivered' | 'failed' | 'skipped', error: string | null): Promise<void> {
  await runPrepared(pool, SETTLE, [id, status, error]);
}

/** One attempt at a delivery. Never throws for the destination's sake; a database error throws (the job is retried). */
export async function attemptDelivery(pool: Pool, deps: DeliveryDeps, id: string): Promise<DeliveryStep> {
  const [row] = await runPrepared<DeliveryRow>(pool, CLAIM, [[id], NOTIFICATION_LEASE_SECONDS]);
  return row ? deliverClaimed(pool, deps, row) : { kind: 'done', result: 'not due' };
}

/**
 * One attempt at each of a notice's deliveries: those it recorded claimed, and those left due by an
 * earlier pass, claimed together (one statement for all of them, none when there are none). Every
 * claimed one is attempted: the caller gets each one's step, or its database error, and schedules the
 * retries before it fails for an error.
 */
export async function attemptDeliveries(
  pool: Pool,
  deps: DeliveryDeps,
  notice: NoticeDeliveries,
): Promise<{ id: string; step?: DeliveryStep; error?: unknown }[]> {
  const rows =
    notice.due.length === 0
      ? notice.claimed
      : [...notice.claimed, ...(await runPrepared<DeliveryRow>(pool, CLAIM, [[...notice.due], NOTIFICATION_LEASE_SECONDS]))];
  const attempts = await Promise.allSettled(rows.map((row) => deliverClaimed(pool, deps, row)));
  return attempts.map((attempt, index) => {
    const id = rows[index]?.id ?? '';
    return attempt.status === 'fulfilled' ? { id, step: attempt.value } : { id, error: attempt.reason as unknown };
  });
}

async function deliverClaimed(pool: Pool, deps: DeliveryDeps, row: DeliveryRow): Promise<DeliveryStep> {
  const id = row.id;
  if (!row.enabled) {
    await settle(pool, id, 'skipped', 'the configuration was disabled');
    return { kind: 'done', result: 'skipped' };
  }
  const users = await emailsOfUsers(pool, row.organization_id, row.email_user_ids);
  const outcome: SendOutcome = await sendNotification(
    {
      destinationType: row.destination_type,
      url: row.url,
      token: row.token_encrypted ? deps.secrets.decrypt(row.token_encrypted) : null,
      recipients: [...new Set([...row.email_addresses, ...users.values()])],
    },
    await factsOf(pool, row, deps.publicBaseUrl),
    deps.senders,
  );
  const response = JSON.stringify(outcome.response);
  const delay = deps.retryDelaysMs[row.attempts - 1];
  if (outcome.result === 'delivered' || outcome.result === 'failed' || delay === undefined) {
    const result = outcome.result === 'delivered' ? 'delivered' : 'failed';
    const error = result === 'delivered' ? null : (outcome.error ?? 'not delivered');
    await deps.settle({ id, configurationId: row.configuration_id, response, status: result, error });
    return { kind: 'done', result };
  }
  const delayMs = Math.max(delay, Math.min(outcome.retryAfterMs ?? 0, 3_600_000));
  await runPrepared(pool, RECORD_AND_RETRY, [id, response, delayMs / 1000, outcome.error ?? null]);
  return { kind: 'retry', attempt: row.attempts + 1, delayMs };
}

/** Pending deliveries overdue by more than `graceSeconds` (a lost job or a crashed attempt's lease): the sweeper enqueues them again. */
export async function overdueDeliveries(pool: Pool, graceSeconds: number, limit = 100): Promise<string[]> {
  const rows = await pool.query<{ id: string }>(
    `select id from notification_deliveries where status = 'pending' and due_at < now() - make_interval(secs => $1) order by due_at limit $2`,
    [graceSeconds, limit],
  );
  return rows.rows.map((row) => row.id);
}
