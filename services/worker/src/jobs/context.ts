import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '@runtasks/shared/config';
import type { Logger } from '@runtasks/shared/logger';
import type { SecretBox } from '@runtasks/shared/security';
import type { DeliveryDeps } from '@runtasks/shared/notifications';
import type { AdvanceSettings, BatchWriter, DispatchDeps, IdleRunCursor, RunExecutor } from '@runtasks/shared/engine';
import type { Queue } from 'bullmq';
import type { Pool } from 'pg';

/** What the worker's jobs share: built once by startWorker, read by every job (jobs are thin adapters to the engine). */
export interface JobContext {
  config: Config;
  orm: MikroORM;
  logger: Logger;
  secrets: SecretBox;
  queue: Queue;
  /** Notification jobs' own queue (QUEUES.notifications). */
  notificationQueue: Queue;
  executor: RunExecutor;
  settings: AdvanceSettings;
  /** The advances' pool (generic plans by index, see genericIndexPool). */
  advanceDb: Pool;
  dispatchDeps: DispatchDeps;
  /** The started stages whose deadline job is still to add (one job per batch). */
  stageDeadlines: BatchWriter<string>;
  graceSeconds: number;
  /** Where this worker's next sweep goes on looking at idle runs (each pass looks at a bounded number). */
  sweep: { idleCursor: IdleRunCursor | undefined };
  /** What notification deliveries need (docs/notifications.md). */
  notifications: DeliveryDeps;
}

export interface JobData {
  runId?: string;
  resultId?: string;
  /** run.created: the stage the API started as it created the run, whose first attempts are to deliver (and task.deadline's of earlier versions). */
  stageId?: string;
  /** task.deadline: the stages whose results' progress deadline it is (a result's id in jobs of earlier versions). */
  stageIds?: string[];
  /** notification.run: the status the run moved to, and from (null at its creation). */
  status?: string;
  from?: string | null;
  /** notification.deliver: the delivery to attempt. */
  deliveryId?: string;
}

/** A unit of work of its own for one job. */
export const forkEm = (context: JobContext): EntityManager => context.orm.em.fork() as EntityManager;
