import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { sweep, type IdleRunCursor } from '@runtasks/shared/engine';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

const GRACE_SECONDS = 30;

/**
 * The sweeper's look at idle runs (unfinished, untouched for the grace period) wakes those a lost job
 * left behind, and only those: a run waiting for its task servers (or a person) is left alone however
 * long it waits, and runs that wait never hide, page after page, one that may move.
 */
describe("the sweeper's look at idle runs", () => {
  let fx: AdvanceFixture;
  beforeAll(async () => {
    fx = await startAdvanceFixture('sweeper-idle', ['pre_plan']);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const sql = async (text: string, values: unknown[] = []): Promise<void> => {
    await (await nativePool(fx.orm.em)).query(text, values);
  };

  /** A run in its pre_plan stage whose two results were delivered and acknowledged: it waits for their verdicts. */
  const waitingRun = async (idleMinutes: number): Promise<string> => {
    const runId = await fx.createRun();
    await sql(
      `update task_results set attempts = 1, acknowledged_at = now(), next_attempt_at = null
        where task_stage_id in (select id from task_stages where run_id = $1)`,
      [runId],
    );
    await idleSince(runId, idleMinutes);
    return runId;
  };

  /** A run whose results all passed, and whose wake-up (the outbox event's job) was lost: it may move. */
  const leftBehindRun = async (idleMinutes: number): Promise<string> => {
    const runId = await fx.createRun();
    await sql(`update task_results set status = 'passed' where task_stage_id in (select id from task_stages where run_id = $1)`, [runId]);
    await idleSince(runId, idleMinutes);
    return runId;
  };

  const idleSince = (runId: string, minutes: number): Promise<void> =>
    sql(`update runs set updated_at = now() - make_interval(mins => $2) where id = $1`, [runId, minutes]);

  const idleRunsWoken = async (
    options: Parameters<typeof sweep>[2] = {},
  ): Promise<{ runIds: string[]; cursor: IdleRunCursor | undefined }> => {
    const result = await sweep(fx.orm.em.fork(), GRACE_SECONDS, options);
    return { runIds: result.runIds, cursor: result.idleCursor };
  };

  it('wakes a run whose wake-up was lost, and leaves one waiting for its task servers alone', async () => {
    const waiting = await waitingRun(60);
    const leftBehind = await leftBehindRun(60);
    const { runIds, cursor } = await idleRunsWoken();
    expect(runIds).toContain(leftBehind);
    expect(runIds).not.toContain(waiting);
    // Every idle run was looked at: the next pass starts from the oldest again.
    expect(cursor).toBeUndefined();
    // Once woken and moved on, the left-behind run has nothing left to do either.
    await fx.advance(leftBehind);
    await idleSince(leftBehind, 60);
    expect((await idleRunsWoken()).runIds).not.toContain(leftBehind);
  });

  it('does not look at runs touched within the grace period', async () => {
    const recent = await leftBehindRun(0);
    expect((await idleRunsWoken()).runIds).not.toContain(recent);
  });

  it('re-drives an overdue delivery that may still be attempted, never one past its last attempt', async () => {
    const runId = await fx.createRun();
    // Both leased long ago by a worker that died: one at its first attempt of three, one at its last.
    const { rows } = await (
      await nativePool(fx.orm.em)
    ).query<{ id: string }>(
      `select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = $1 order by tr.id`,
      [runId],
    );
    const [first, last] = rows.map((row) => row.id);
    await sql(
      `update task_results set attempts = case when id = $1 then 1 else 3 end, next_attempt_at = now() - interval '1 hour'
                where id in ($1, $2)`,
      [first, last],
    );
    const { resultIds } = await sweep(fx.orm.em.fork(), GRACE_SECONDS, { maxAttempts: 3 });
    const ours = resultIds.filter((result) => result.id === first || result.id === last);
    expect(ours).toEqual([{ id: first, attempt: 2 }]);
  });

  it('goes on past the runs that wait, page after page and from one pass to the next, to the one that may move', async () => {
    // Only this test's runs are idle.
    await sql(`update runs set updated_at = now()`);
    const waiting: string[] = [];
    for (let index = 0; index < 5; index += 1) waiting.push(await waitingRun(120 - index));
    const leftBehind = await leftBehindRun(30);
    const pages = { idlePageSize: 2, idlePages: 2 };

    // The first pass reads two pages (the four oldest runs, all waiting) and says where it stopped.
    const first = await idleRunsWoken(pages);
    expect(first.runIds).toEqual([]);
    expect(first.cursor?.id).toBe(waiting[3]);
    // The next goes on from there: the fifth waiting run and the left-behind one, then an empty page.
    const second = await idleRunsWoken({ ...pages, idleCursor: first.cursor });
    expect(second.runIds).toEqual([leftBehind]);
    expect(second.cursor).toBeUndefined();
    // A pass with pages enough finds it at once.
    expect((await idleRunsWoken({ idlePageSize: 2, idlePages: 4 })).runIds).toEqual([leftBehind]);
  });
});
