import { wrap } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import {
  conflict,
  DB_NOW_ISO,
  insertPlannedStagesFor,
  JOBS,
  newId,
  recordOutboxEvent,
  Run,
  runActionSources,
  runActionTarget,
  statusTimestampKey,
  type RunAction,
  type Workspace,
} from '@runtasks/shared';
import { isGlobalEntitled } from './run-task.service.ts';

export interface CreateRunInput {
  message: string;
  planOnly: boolean;
  isDestroy: boolean;
  autoApply: boolean;
  planJson: unknown;
  configurationVersionId: string | null;
  createdBy: string | null;
}

/**
 * Creates a run with its task stages and results (status `pending`) and its `run.created` outbox
 * event in one transaction. Redis is not touched: the worker's relay publishes the event after
 * commit (woken by NOTIFY), so a crash at any point either loses nothing or creates nothing.
 * Returns the run and its stages' ids in lifecycle order.
 */
export async function createRun(em: EntityManager, workspace: Workspace, input: CreateRunInput): Promise<{ run: Run; stageIds: string[] }> {
  return em.transactional(async (tx) => {
    const organization = workspace.organization;
    // Loaded with the workspace by the API's lookups; read here only when a caller did not.
    if (!wrap(organization).isInitialized()) await wrap(organization).init();
    const run = tx.create(Run, {
      id: newId('run'),
      organization,
      workspace,
      planId: newId('plan'),
      status: 'pending',
      message: input.message,
      isDestroy: input.isDestroy,
      planOnly: input.planOnly,
      autoApply: input.autoApply,
      planJson: input.planJson ?? null,
      configurationVersionId: input.configurationVersionId,
      createdBy: input.createdBy,
    });
    await tx.flush();
    const stages = await insertPlannedStagesFor(tx, run.id, {
      workspaceId: workspace.id,
      organizationId: organization.id,
      planOnly: input.planOnly,
      globalEntitled: isGlobalEntitled(organization),
    });
    await recordOutboxEvent(tx, JOBS.runCreated, run.id);
    return { run, stageIds: stages.map((stage) => stage.id) };
  });
}

/**
 * Applies a run action as one conditional update, so concurrent actions cannot both win; a run that
 * is canceled or discarded takes its unfinished stages and results with it.
 */
export async function applyRunAction(em: EntityManager, run: Run, action: RunAction): Promise<void> {
  const target = runActionTarget(action, { status: run.status, planOnly: run.planOnly });
  if (!target)
    throw conflict(`A run that is ${run.status} cannot be ${action === 'apply' ? 'applied' : `${action}ed`}.`, 'transition not allowed');
  await em.transactional(async (tx) => {
    const sources = runActionSources(action);
    const updated = await tx.execute(
      `update runs set status = ?, status_timestamps = status_timestamps || jsonb_build_object(?::text, ${DB_NOW_ISO}),
              version = version + 1, updated_at = now()
        where id = ? and status in (${sources.map(() => '?').join(', ')})${action === 'apply' ? ' and not plan_only' : ''}`,
      [target, statusTimestampKey(target), run.id, ...sources],
      'run',
    );
    if ((updated as { affectedRows?: number }).affectedRows === 0) {
      throw conflict(
        `The run changed concurrently and can no longer be ${action === 'apply' ? 'applied' : `${action}ed`}.`,
        'transition not allowed',
      );
    }
    // Wake the workers (through the outbox, so the API never waits on Redis).
    await recordOutboxEvent(tx, JOBS.runAdvance, run.id);
    if (action === 'apply') return;
    const canceledAt = `jsonb_build_object('canceled-at', ${DB_NOW_ISO})`;
    await tx.execute(
      // Locked in id order (then their stages, by the trigger), as the sweeper does, so the two never deadlock.
      `with open_results as (
         select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id
          where ts.run_id = ? and tr.status in ('pending', 'running') order by tr.id for update of tr)
       update task_results tr set status = 'canceled', status_timestamps = tr.status_timestamps || ${canceledAt},
              version = tr.version + 1, updated_at = now()
         from open_results where tr.id = open_results.id and tr.status in ('pending', 'running')`,
      [run.id],
    );
    await tx.execute(
      `update task_stages set status = 'canceled', status_timestamps = status_timestamps || ${canceledAt}, version = version + 1, updated_at = now()
        where run_id = ? and status in ('pending', 'running', 'awaiting_override')`,
      [run.id],
    );
  });
}
