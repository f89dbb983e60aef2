import type { Pool } from 'pg';
import { prepared, runPrepared } from '../db/prepared.ts';
import { newId } from '../domain/ids.ts';
import { BatchWriter } from '../engine/batch-writer.ts';
import {
  DELIVERY_RESPONSES_KEPT,
  MAX_NOTIFICATION_CONFIGURATIONS,
  mergeDeliveryResponses,
  noticeMessage,
  noticeOfChange,
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
/** The most configurations a workspace has (MAX_NOTIFICATION_CONFIGURATIONS): ids drawn for a notice's deliveries. */
const DELIVERY_IDS = MAX_NOTIFICATION_CONFIGURATIONS;

/**
 * A notice in one statement: its run (with its workspace and organization, and, for a wait for
 * confirmation, only while the run still waits: $9), the workspace's enabled configurations subscribed to
 * its trigger (at most twenty, by index), and a delivery row for each (the unique key makes a repeated
 * event a no-op), recorded already claimed by this pass (its first attempt counted and leased, as CLAIM
 * does: a crash before it is sent is re-driven after the lease), returned with what sending needs; then
 * the notice's deliveries a crashed earlier pass left pending and due (the table's read does not see the
 * CTE's rows), for CLAIM. $1 ids to draw from, $2 run, $3 trigger, $4 occasion, $5 message, $6 status,
 * $7 its key in the run's status timestamps, $8 lease (s).
 */
const RECORD_NOTICE = prepared(
  'notification-record-notice',
  `with run as (
     select r.id, r.message as run_message, r.created_at as run_created_at, r.created_by, r.confirmed_by,
            w.id as workspace_id, w.name as workspace_name, o.id as organization_id, o.name as organization_name,
            coalesce((r.status_timestamps ->> $7::text)::timestamptz, now()) as run_updated_at
       from runs r join workspaces w on w.id = r.workspace_id join organizations o on o.id = w.organization_id
      where r.id = $2 and (not $9::boolean or (not r.auto_apply and not r.plan_only and r.status = $6::text))),
   subscribed as (
     select c.id, c.name, c.destination_type, c.url, c.token_encrypted, c.email_addresses, c.email_user_ids,
            row_number() over (order by c.created_at, c.id) as n
       from notification_configurations c join run on c.workspace_id = run.workspace_id
      where c.enabled and c.triggers @> jsonb_build_array($3::text)),
   recorded as (
     insert into notification_deliveries (id, configuration_id, run_id, trigger, occasion, message, run_status, run_updated_at, status, attempts, due_at, created_at)
     select ($1::text[])[c.n], c.id, run.id, $3, $4, $5, $6, run.run_updated_at, 'pending', 1, now() + make_interval(secs => $8), now()
       from subscribed c cross join run
     on conflict (configuration_id, run_id, trigger, occasion) do nothing
     returning id, configuration_id, run_updated_at)
   select d.id, true as claimed, d.run_updated_at, c.id as configuration_id, c.name, c.destination_type, c.url, c.token_encrypted,
          c.email_addresses, c.email_user_ids, run.run_message, run.run_created_at, run.created_by, run.confirmed_by,
          run.workspace_id, run.workspace_name, run.organization_id, run.organization_name
     from recorded d join subscribed c on c.id = d.configuration_id cross join run
   union all
   select d.id, false, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null, null
     from notification_deliveries d
    where d.run_id = $2 and d.trigger = $3 and d.occasion = $4 and d.status = 'pending' and d.due_at <= now() and exists (select 1 from run)`,
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

/** A row of RECORD_NOTICE: a delivery it recorded claimed, with what sending needs, or (not claimed) an earlier one still due. */
type RecordedRow = { id: string; claimed: true } & RunPayloadColumns & {
    run_updated_at: Date;
    configuration_id: string;
    name: string;
    destination_type: NotificationDestinationType;
    url: string | null;
    token_encrypted: string | null;
    email_addresses: string[];
    email_user_ids: string[];
  };

/**
 * Decides what a run's change from `from` to `status` tells, and records one delivery per enabled
 * configuration of its workspace subscribed to that trigger, claimed for the caller to attempt at once
 * (one statement; two where the message names the run's tasks). Also returns the ids of that notice's
 * deliveries a crashed earlier pass left pending and due.
 */
export async function decideNotifications(pool: Pool, runId: string, status: RunStatus, from: RunStatus | null): Promise<NoticeDeliveries> {
  const change = noticeOfChange(from, status);
  if (!change) return { claimed: [], due: [] };
  const { notice } = change;
  // Only these triggers' messages name the run's tasks: the others need no read of them.
  const explained = notice.trigger === 'run:needs_attention' || notice.trigger === 'run:errored';
  const message = noticeMessage(notice, status, explained ? await tasksOf(pool, runId) : []);
  const rows = await runPrepared<RecordedRow | { id: string; claimed: false }>(pool, RECORD_NOTICE, [
    Array.from({ length: DELIVERY_IDS }, () => newId('notificationDelivery')),
    runId,
    notice.trigger,
    notice.occasion,
    message,
    status,
    statusTimestampKey(status),
    NOTIFICATION_LEASE_SECONDS,
    change.onlyWhileAwaitingConfirmation,
  ]);
  const claimed: DeliveryRow[] = [];
  const due: string[] = [];
  for (const row of rows) {
    if (!row.claimed) {
      due.push(row.id);
      continue;
    }
    const { claimed: _claimed, ...columns } = row;
    claimed.push({ ...columns, attempts: 1, trigger: notice.trigger, message, run_status: status, run_id: runId, enabled: true });
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
