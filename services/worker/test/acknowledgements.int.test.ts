import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { newId } from '@runtasks/shared/domain';
import type { Pool } from 'pg';
import { createRun, seedOrganization } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { Acknowledgements } from '@runtasks/shared/engine';

const TASKS = 10;

/** A pool that counts the statements run on it directly (what Acknowledgements does). */
function countingPool(pool: Pool): { pool: Pool; statements: () => number } {
  let count = 0;
  const counted = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return (...args: Parameters<Pool['query']>) => {
        count += 1;
        return (target.query as (...all: unknown[]) => unknown)(...args);
      };
    },
  });
  return { pool: counted, statements: () => count };
}

/**
 * Acknowledgements that arrive while one is being written go together in the next statement; each
 * caller learns about its own. Real results in `running`, as the advance leaves them.
 */
describe('acknowledgements of delivered task requests', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness();
  });

  afterAll(async () => {
    await h?.close();
  });

  /** Straight on the pool: MikroORM's execute inlines an array parameter as a list. */
  const sql = async <T extends object>(text: string, values: unknown[]): Promise<T[]> =>
    (await (await nativePool(h.orm.em)).query<T & Record<string, unknown>>(text, values)).rows;

  /**
   * Results running with their first attempt claimed. `claimRows`: with the row each claim writes
   * (`unrecorded`, before its POST), as every claim does; without, as claims of earlier versions left them.
   */
  async function runningResults(claimRows = true): Promise<string[]> {
    const f = await seedOrganization(h, `acks-${newId('run').slice(-6)}`);
    const db = h.orm.em.fork().getConnection();
    const [org] = await db.execute<{ id: string }[]>(`select id from organizations where name = ?`, [f.organization]);
    for (let index = 0; index < TASKS; index += 1) {
      const taskId = newId('task');
      // Inserted directly: the free edition allows one task per organization through the API.
      await db.execute(
        `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         values (?, ?, ?, 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now())`,
        [taskId, org?.id, `ack-${index}`],
      );
      await db.execute(
        `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
         values (?, ?, ?, 'mandatory', '{post_plan}', now(), now())`,
        [newId('workspaceTask'), f.workspaceId, taskId],
      );
    }
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const rows = await db.execute<{ id: string }[]>(
      `update task_results tr set status = 'running', attempts = 1 from task_stages ts
        where ts.id = tr.task_stage_id and ts.run_id = ? returning tr.id`,
      [runId],
    );
    expect(rows).toHaveLength(TASKS);
    if (claimRows)
      await sql(
        `insert into delivery_attempts (task_result_id, attempt, started_at, duration_ms, error_kind) select id, 1, now(), 0, 'unrecorded' from unnest($1::text[]) id`,
        [rows.map((row) => row.id)],
      );
    return rows.map((row) => row.id);
  }

  const attempt = (resultId: string): unknown[] => [resultId, 1, new Date(), 12, 200, null, 'ok'];

  it('writes the first at once and those that arrived meanwhile together, each recorded once', async () => {
    const ids = await runningResults();
    const { pool, statements } = countingPool(await nativePool(h.orm.em));
    const acknowledgements = new Acknowledgements(pool);
    await Promise.all(ids.map((id) => acknowledgements.write(attempt(id))));
    expect(statements()).toBe(2);
    const rows = await sql<{ acknowledged: boolean; attempts: number }>(
      `select tr.acknowledged_at is not null as acknowledged, (select count(*)::int from delivery_attempts d where d.task_result_id = tr.id) as attempts
         from task_results tr where tr.id = any($1)`,
      [ids],
    );
    expect(rows).toHaveLength(TASKS);
    expect(rows.every((row) => row.acknowledged && row.attempts === 1)).toBe(true);
    // Each claim's row filled in with its answer, not a second row beside it.
    const answered = await sql<{ count: number }>(
      `select count(*)::int as count from delivery_attempts where task_result_id = any($1) and http_status = 200 and error_kind is null`,
      [ids],
    );
    expect(answered[0]?.count).toBe(TASKS);
    // Written again (a re-driven attempt that was acknowledged twice): nothing more.
    await acknowledgements.write(attempt(ids[0] ?? ''));
    const [again] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ count: number }[]>(`select count(*)::int as count from delivery_attempts where task_result_id = ?`, [ids[0]]);
    expect(again?.count).toBe(1);
  });

  it('a row refused for what it holds fails only its own caller: the rest of its statement is written', async () => {
    // Attempts without their claim's row: each answer is inserted (the refused ones fail there too).
    const ids = await runningResults(false);
    const acknowledgements = new Acknowledgements(await nativePool(h.orm.em));
    const [first, second, third, fourth] = ids as [string, string, string, string];
    const results = await Promise.allSettled([
      acknowledgements.write(attempt(first)),
      // Written together, in the second statement: an attempt number that is not an integer (a data
      // exception), an attempt of a result that no longer exists (its workspace deleted while its
      // request was in flight: a foreign key violation), and two good ones.
      acknowledgements.write([second, 'second', new Date(), 12, 200, null, 'ok']),
      acknowledgements.write(attempt(third)),
      acknowledgements.write(attempt(newId('taskResult'))),
      acknowledgements.write(attempt(fourth)),
    ]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
    const rows = await sql<{ id: string }>(`select id from task_results where id = any($1) and acknowledged_at is not null order by id`, [
      [first, second, third, fourth],
    ]);
    expect(rows.map((row) => row.id)).toEqual([first, third, fourth].sort());
    const attempts = await sql<{ count: number }>(`select count(*)::int as count from delivery_attempts where task_result_id = any($1)`, [
      [first, second, third, fourth],
    ]);
    expect(attempts[0]?.count).toBe(3);
  });
});
