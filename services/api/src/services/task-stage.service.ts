import type { EntityManager } from '@mikro-orm/postgresql';
import { conflict, DB_NOW_ISO, JOBS, recordOutboxEvent, type TaskStage } from '@runtasks/shared';
import type { TaskStageRow } from '../serializers/rows.ts';

/**
 * Overrides a stage awaiting override so its run goes on. One conditional update: of two concurrent
 * overrides exactly one wins, the other gets 409. The workers are woken through the outbox in the same
 * transaction, to pass the stage and go on. Returns the stage as the override left it: once committed,
 * a worker may move it on (pass it) before the caller answers, so it is not read again afterwards.
 * The caller has checked that its principal may override the stage's organization's tasks.
 */
export async function overrideTaskStage(em: EntityManager, stage: TaskStage): Promise<TaskStageRow> {
  return em.transactional(async (tx) => {
    const [row] = await tx.execute<TaskStageRow[]>(
      // Timestamps are set once: the stage's running-at is when it first ran, and stays.
      `update task_stages set status = 'running', status_timestamps = jsonb_build_object('running-at', ${DB_NOW_ISO}) || status_timestamps,
              version = version + 1, updated_at = now()
        where id = ? and status = 'awaiting_override'
        returning id, run_id, stage, status, status_timestamps, created_at, updated_at`,
      [stage.id],
    );
    if (!row) throw conflict(`A task stage that is ${stage.status} cannot be overridden.`, 'transition not allowed');
    await recordOutboxEvent(tx, JOBS.runAdvance, stage.run.id);
    return row;
  });
}
