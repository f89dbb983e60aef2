import type { EntityManager } from '@mikro-orm/postgresql';
import type { ActedBy } from '@runtasks/shared/domain';
import { nativePool, type TaskStage } from '@runtasks/shared/db';
import { overrideStage } from '@runtasks/shared/engine';
import type { TaskStageRow } from '../serializers/rows.ts';

/**
 * Overrides a stage awaiting override so its run goes on (overrideStage in the engine: 409 where it is
 * no longer awaiting one; it records who overrode it, and the comment). The caller has checked that
 * its principal may override the stage's organization's tasks.
 */
export async function overrideTaskStage(em: EntityManager, stage: TaskStage, by: ActedBy): Promise<TaskStageRow> {
  return overrideStage(await nativePool(em), stage, by);
}
