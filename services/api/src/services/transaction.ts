import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Runs `work` in a transaction on the request's own EntityManager, so that entities it already holds
 * (a workspace being created or changed) flush in the same transaction as raw statements after them.
 */
export async function inTransaction<T>(em: EntityManager, work: () => Promise<T>): Promise<T> {
  await em.begin();
  try {
    const result = await work();
    await em.commit();
    return result;
  } catch (error) {
    await em.rollback();
    throw error;
  }
}
