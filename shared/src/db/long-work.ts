import type { EntityManager } from '@mikro-orm/postgresql';

/**
 * Runs `work` in a transaction whose statements may take as long as their data needs, while waiting
 * for a lock no longer than `lockTimeoutMs` (0: as long as it takes). The pool's statement timeout
 * (DATABASE_STATEMENT_TIMEOUT_MS) is a backstop for statements stuck behind a lock; a cascading delete
 * of an organization or a workspace with years of runs is work, not waiting, and must not be cut short
 * at a size that would refuse it at every retry.
 */
export async function inLongTransaction<T>(em: EntityManager, lockTimeoutMs: number, work: (tx: EntityManager) => Promise<T>): Promise<T> {
  return em.transactional(async (tx) => {
    await tx.execute('set local statement_timeout = 0');
    if (lockTimeoutMs > 0) await tx.execute(`set local lock_timeout = ${Math.trunc(lockTimeoutMs)}`);
    return work(tx);
  });
}
