import { NOTICE_STATUSES } from '../domain/notifications.ts';
import { JOBS, OUTBOX_CHANNEL } from '../queue/names.ts';

/** The outbox topic (and job name) of a run's status change that a workspace's notifications may want. */
export const NOTIFICATION_RUN_TOPIC = JOBS.notificationRun;

/**
 * The body of runs' triggers `runs_notify_created` and `runs_notify_status`: every run status change,
 * whichever statement makes it (the advance, an action, a pipeline's report, the sweeper), is recorded
 * in the outbox in the same transaction when the run's workspace has an enabled notification
 * configuration. The worker decides from the change which trigger it is (shared/src/domain/notifications.ts)
 * and delivers; nothing is decided or sent here, so a run's statement costs one indexed lookup more.
 * Written as PostgreSQL prints it back (the schema comparison is textual).
 */
export const RUN_NOTIFY_TRIGGER_BODY =
  `if exists (select 1 from notification_configurations c where c.workspace_id = new.workspace_id and c.enabled) then
          insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
            values ('${NOTIFICATION_RUN_TOPIC}', new.id, jsonb_build_object('runId', new.id, 'status', new.status, 'from', case when tg_op = 'UPDATE' then old.status end), now(), 0);
          perform pg_notify('${OUTBOX_CHANNEL}', new.id);
        end if;
        return null;`.replace(/\s+/g, ' ');

/**
 * When `runs_notify_status` fires: the status changed to one that may give a notice (NOTICE_STATUSES),
 * so a run's other changes (its tasks' stages running, say) record nothing for notifications. Written
 * as PostgreSQL prints it back (the schema comparison is textual).
 */
export const RUN_NOTIFY_STATUS_WHEN = `(((old.status)::text IS DISTINCT FROM (new.status)::text) AND ((new.status)::text = ANY (ARRAY[${NOTICE_STATUSES.map(
  (status) => `'${status}'::text`,
).join(', ')}])))`;
