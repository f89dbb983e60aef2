import type { EntityManager } from '@mikro-orm/postgresql';
import { DB_NOW_ISO } from '@runtasks/shared';

export interface SweepResult {
  /** Runs to advance: a result of theirs expired, or they were left behind. */
  runIds: string[];
  /** Results whose next delivery attempt is overdue (its delayed job was lost). */
  resultIds: { id: string; attempt: number }[];
}

/**
 * The safety net that makes Redis optional for correctness: deadlines live in PostgreSQL, and this
 * periodic pass ends expired results and re-drives whatever a lost job left behind.
 */
/**
 * Ends results past their progress deadline or hard deadline as `errored` (one conditional update, so
 * a callback racing the deadline and this agree on exactly one terminal transition): every such result,
 * or those of one stage or one result (a deadline job). Returns their runs.
 */
export async function expireResults(
  em: EntityManager,
  only: { resultId: string } | { stageId: string } | undefined = undefined,
): Promise<string[]> {
  const [filter, params] =
    only === undefined ? ['', []] : 'stageId' in only ? ['and tr.task_stage_id = ?', [only.stageId]] : ['and tr.id = ?', [only.resultId]];
  const rows = await em.execute<{ run_id: string }[]>(
    `with due as (
       -- Locked in id order (then their stages, by the trigger), so two passes over the same results never deadlock.
       -- A result with a hard deadline has a progress deadline (a constraint says so); saying so lets
       -- this use the deadline index, which holds open results with a progress deadline only.
       select tr.id from task_results tr
        where tr.status in ('pending', 'running') and tr.progress_deadline is not null
          and (tr.progress_deadline < now() or tr.hard_deadline < now())
          ${filter}
        order by tr.id for update),
     expired as (
       update task_results tr set status = 'errored',
              message = case when tr.hard_deadline < now() then 'The run task ran longer than its maximum runtime.'
                             else 'The run task sent no progress within its progress timeout.' end,
              status_timestamps = tr.status_timestamps || jsonb_build_object('errored-at', ${DB_NOW_ISO}),
              version = tr.version + 1, updated_at = now()
         from due where tr.id = due.id and tr.status in ('pending', 'running')
        returning tr.task_stage_id)
     select distinct ts.run_id from expired e join task_stages ts on ts.id = e.task_stage_id`,
    params,
  );
  return rows.map((row) => row.run_id);
}

/**
 * The runs the sweeper re-drives. Its condition on `status` is the predicate of `runs_unfinished_idx`
 * word for word, so PostgreSQL reads that index (the unfinished runs, oldest first) and never the
 * finished runs, however many there are (test/plans.int.test.ts checks the plan).
 */
export const IDLE_RUNS_SQL = `select id from runs
      where status not in ('applied', 'post_apply_completed', 'planned_and_finished', 'discarded', 'errored', 'canceled')
        and updated_at < now() - make_interval(secs => ?)
      order by updated_at limit 500`;

export async function sweep(em: EntityManager, graceSeconds: number): Promise<SweepResult> {
  const expired = await expireResults(em);
  const overdue = await em.execute<{ id: string; attempts: number }[]>(
    `select id, attempts from task_results
      where status = 'running' and progress_deadline is not null and acknowledged_at is null
        and next_attempt_at < now() - make_interval(secs => ?)
      order by next_attempt_at limit 500`,
    [graceSeconds],
  );
  // Non-final runs nobody touched for a while: advancing them is a no-op when they are waiting.
  const idle = await em.execute<{ id: string }[]>(IDLE_RUNS_SQL, [graceSeconds]);
  const runIds = [...new Set([...expired, ...idle.map((row) => row.id)])];
  return { runIds, resultIds: overdue.map((row) => ({ id: row.id, attempt: row.attempts + 1 })) };
}
