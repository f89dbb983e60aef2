import { holdingSql, waitingSql } from '@runtasks/shared/engine';

/**
 * INV-12, the workspace run queue (shared/src/domain/run-queue.ts), as SQL over the database:
 *
 * - at most one run holds a workspace;
 * - a run waiting in the queue has started nothing: every stage and result of it pending, never attempted;
 * - a waiting run waits behind something: a holder or a person's lock (else, past the grace, its
 *   admission was lost and nothing repaired it).
 *
 * Called by checkInvariants, which counts the waiting runs apart from those INV-4 judges.
 */
type Query = <T>(sql: string, params?: unknown[]) => Promise<T[]>;

export async function queueViolations(query: Query, graceSeconds: number): Promise<string[]> {
  const violations: string[] = [];
  for (const row of await query<{ workspace_id: string; holders: string[] }>(
    `select workspace_id, array_agg(id order by id) as holders from runs h where ${holdingSql('h')} group by workspace_id having count(*) > 1`,
  ))
    violations.push(`workspace ${row.workspace_id}: held by ${row.holders.length} runs at once, ${row.holders.join(', ')} (INV-12)`);
  for (const row of await query<{ id: string; stages: number; results: number }>(
    `select r.id, count(distinct ts.id) filter (where ts.status <> 'pending') as stages,
            count(tr.id) filter (where tr.status <> 'pending' or tr.attempts > 0) as results
       from runs r left join task_stages ts on ts.run_id = r.id left join task_results tr on tr.task_stage_id = ts.id
      where ${waitingSql('r')} group by r.id`,
  )) {
    if (Number(row.stages) > 0 || Number(row.results) > 0)
      violations.push(
        `run ${row.id}: waits in its workspace's queue, yet ${row.stages} stages and ${row.results} results started (INV-12)`,
      );
  }
  for (const row of await query<{ id: string; idle: number }>(
    `select r.id, extract(epoch from now() - r.updated_at)::float8 as idle from runs r join workspaces w on w.id = r.workspace_id
      where ${waitingSql('r')} and w.lock_kind is null
        and not exists (select 1 from runs h where h.workspace_id = r.workspace_id and ${holdingSql('h')})
        and r.updated_at < now() - make_interval(secs => ?)`,
    [graceSeconds],
  ))
    violations.push(`run ${row.id}: waits in the queue of a free workspace for ${Number(row.idle).toFixed(1)} s (INV-12)`);
  return violations;
}
