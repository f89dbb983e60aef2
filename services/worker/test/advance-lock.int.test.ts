import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared';
import { createRun, eventually } from '../../../test/support/fixtures.ts';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface Versions {
  run: { status: string; version: number };
  stages: { stage: string; status: string; version: number }[];
  results: { status: string; version: number; attempts: number }[];
}

/**
 * An advance reads the run's stages in the statement that locks the run, so it reads them as that
 * statement began, before it waited for the lock. When the advance holding the lock moved the run,
 * the waiting one must not act on what it read before: it reads the stages again.
 */
describe("an advance that waited for the run's lock", () => {
  let fx: AdvanceFixture;
  beforeAll(async () => {
    fx = await startAdvanceFixture('advance-lock', ['post_plan', 'pre_apply']);
  });
  afterAll(async () => {
    await fx?.close();
  });
  /** Every version and status the advance writes: a second move of the same step would show in them. */
  const versionsOf = async (runId: string): Promise<Versions> => {
    const pool = await nativePool(fx.orm.em);
    const [run] = (await pool.query<Versions['run']>('select status, version from runs where id = $1', [runId])).rows;
    const stages = (
      await pool.query<Versions['stages'][number]>('select stage, status, version from task_stages where run_id = $1 order by stage', [
        runId,
      ])
    ).rows;
    const results = (
      await pool.query<Versions['results'][number]>(
        `select tr.status, tr.version, tr.attempts from task_results tr join task_stages ts on ts.id = tr.task_stage_id
          where ts.run_id = $1 order by ts.stage, tr.id`,
        [runId],
      )
    ).rows;
    return { run: run as Versions['run'], stages, results };
  };

  it('reads the stages again and starts nothing twice', async () => {
    // What one advance alone leaves: the oracle.
    const alone = await createRun(fx.h, fx.f.organizationToken, fx.f.workspaceId);
    expect(await fx.advance(alone)).toHaveLength(2);
    const expected = await versionsOf(alone);
    expect(expected.results.filter((result) => result.status === 'running')).toHaveLength(2);

    const raced = await createRun(fx.h, fx.f.organizationToken, fx.f.workspaceId);
    const pool = await nativePool(fx.orm.em);
    const holder = await pool.connect();
    try {
      // Both advances start their statements (and take their snapshots) while the run is locked here.
      await holder.query('begin');
      await holder.query('select id from runs where id = $1 for update', [raced]);
      const advances = [fx.advance(raced), fx.advance(raced)];
      await eventually(async () => {
        const { rows } = await pool.query<{ waiting: number }>(
          `select count(*)::int as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        );
        return rows[0]?.waiting === 2 ? true : undefined;
      });
      await holder.query('commit');
      const started = await Promise.all(advances);
      // One of them started the stage's two results; the other, which waited for it, found nothing to do.
      expect(started.map((each) => each.length).sort()).toEqual([0, 2]);
    } finally {
      holder.release();
    }
    expect(await versionsOf(raced)).toEqual(expected);
  });
});
