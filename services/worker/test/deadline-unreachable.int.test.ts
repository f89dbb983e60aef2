import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { expireResults, sweep } from '@runtasks/shared/engine';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

/**
 * A result whose deadline passes while its request never reached the task server ends `unreachable`,
 * with the error of its last attempt as its message; one that was delivered and then went quiet ends
 * `errored`, as before. Both ways a deadline is met: the stage's deadline job and the sweeper.
 */
describe('a result that reaches its deadline undelivered', () => {
  let fx: AdvanceFixture;
  beforeAll(async () => {
    fx = await startAdvanceFixture('deadline-unreachable', ['pre_plan']);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const query = async <T extends object>(text: string, values: unknown[] = []): Promise<T[]> =>
    (await (await nativePool(fx.orm.em)).query(text, values)).rows as T[];

  /** A run in its pre_plan stage (started at creation) with its two results, past their progress deadline. */
  async function overdueRun(): Promise<{ runId: string; stageId: string; results: [string, string] }> {
    const runId = await fx.createRun();
    const rows = await query<{ id: string; task_stage_id: string }>(
      `select tr.id, tr.task_stage_id from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = $1 order by tr.id`,
      [runId],
    );
    expect(rows).toHaveLength(2);
    await query(`update task_results set progress_deadline = now() - interval '1 second' where task_stage_id = $1`, [
      rows[0]?.task_stage_id,
    ]);
    return { runId, stageId: rows[0]?.task_stage_id ?? '', results: [rows[0]?.id ?? '', rows[1]?.id ?? ''] };
  }

  /** The result's attempts as dispatch records them; the last one decides. `acknowledged`: its request got a 200. */
  async function attempted(resultId: string, attempts: { status?: number; errorKind?: string; excerpt?: string }[], acknowledged = false) {
    for (const [index, attempt] of attempts.entries()) {
      await query(
        `insert into delivery_attempts (task_result_id, attempt, started_at, duration_ms, http_status, error_kind, response_excerpt)
         values ($1, $2, now(), 3, $3, $4, $5)`,
        [resultId, index + 1, attempt.status ?? null, attempt.errorKind ?? null, attempt.excerpt ?? ''],
      );
    }
    await query(
      `update task_results set attempts = $2, acknowledged_at = case when $3 then now() end,
              next_attempt_at = case when $3 then null else now() + interval '1 minute' end where id = $1`,
      [resultId, attempts.length, acknowledged],
    );
  }

  const resultsOf = (ids: string[]) =>
    query<{ id: string; status: string; message: string; unreachable_at: string | null }>(
      `select id, status, message, status_timestamps ->> 'unreachable-at' as unreachable_at from task_results where id = any($1) order by id`,
      [ids],
    );

  it("the stage's deadline job: refused on its last attempt → unreachable with that error; acknowledged, then quiet → errored", async () => {
    const { runId, stageId, results } = await overdueRun();
    await attempted(results[0], [{ status: 500 }, { errorKind: 'refused', excerpt: 'connect ECONNREFUSED 203.0.113.9:443' }]);
    await attempted(results[1], [{ status: 200 }], true);

    expect(await expireResults(fx.orm.em.fork(), { stageIds: [stageId] })).toEqual([runId]);
    const [refused, quiet] = await resultsOf(results);
    expect(refused).toMatchObject({
      status: 'unreachable',
      message: 'The run task request was never delivered (2 attempts): the connection was refused.',
    });
    expect(refused?.unreachable_at).toEqual(expect.any(String));
    expect(quiet).toMatchObject({ status: 'errored', message: 'The run task sent no progress within its progress timeout.' });
  });

  it('the sweeper: a blocked or unresolvable destination → unreachable; answered with an HTTP error, or timed out → errored', async () => {
    const first = await overdueRun();
    const second = await overdueRun();
    await attempted(first.results[0], [{ errorKind: 'blocked' }]);
    await attempted(first.results[1], [{ status: 503 }]);
    await attempted(second.results[0], [{ errorKind: 'dns' }]);
    await attempted(second.results[1], [{ errorKind: 'timeout' }]);

    const swept = await sweep(fx.orm.em.fork(), 3600);
    expect(swept.runIds).toEqual(expect.arrayContaining([first.runId, second.runId]));
    const ended = await resultsOf([...first.results, ...second.results]);
    const byId = new Map(ended.map((row) => [row.id, row]));
    expect(byId.get(first.results[0])).toMatchObject({
      status: 'unreachable',
      message: expect.stringMatching(/^The run task request was never delivered \(1 attempt\): the destination is not allowed/),
    });
    expect(byId.get(first.results[1])?.status).toBe('errored');
    expect(byId.get(second.results[0])).toMatchObject({
      status: 'unreachable',
      message: 'The run task request was never delivered (1 attempt): the host name could not be resolved.',
    });
    expect(byId.get(second.results[1])?.status).toBe('errored');
  });

  it('a result never attempted (its stage not started) stays errored: nothing was tried', async () => {
    const { stageId, results } = await overdueRun();
    await query(`update task_results set attempts = 0, acknowledged_at = null where id = any($1)`, [results]);
    await expireResults(fx.orm.em.fork(), { stageIds: [stageId] });
    expect((await resultsOf(results)).map((row) => row.status)).toEqual(['errored', 'errored']);
  });
});
