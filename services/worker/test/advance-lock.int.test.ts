import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { eventually } from '../../../test/support/fixtures.ts';
import type { RunExecutor } from '@runtasks/shared/engine';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface Versions {
  run: { status: string; version: number };
  stages: { stage: string; status: string; version: number }[];
  results: { status: string; version: number; attempts: number }[];
}

/**
 * An advance reads the run without a lock and writes its steps only where the run's version is still
 * the one it read. Two advances that read the same version both write, one after the other on the
 * run's row lock: the second finds the version moved, writes nothing, and reads the run again.
 */
describe("an advance whose write waited for the run's lock", () => {
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
    const alone = await fx.createRun();
    expect(await fx.advance(alone)).toHaveLength(2);
    const expected = await versionsOf(alone);
    expect(expected.results.filter((result) => result.status === 'running')).toHaveLength(2);

    const raced = await fx.createRun();
    const pool = await nativePool(fx.orm.em);
    const holder = await pool.connect();
    try {
      // Both advances read the run and wait with their writes while the run is locked here.
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
      // One of them started the stage's two results; the other, whose write came second, read the run
      // again and found nothing to do.
      expect(started.map((each) => each.length).sort()).toEqual([0, 2]);
    } finally {
      holder.release();
    }
    expect(await versionsOf(raced)).toEqual(expected);
  });

  it('writes nothing where an action moved the run between its read and its write, and reads it again', async () => {
    const runId = await fx.createRun();
    const pool = await nativePool(fx.orm.em);
    const holder = await pool.connect();
    let advance: Promise<unknown[]> | undefined;
    try {
      // A cancel as the API makes it, uncommitted while the advance reads the run (still pending) and
      // decides to start its first stage.
      await holder.query('begin');
      await holder.query(`update runs set status = 'canceled', version = version + 1 where id = $1`, [runId]);
      await holder.query(
        `update task_results set status = 'canceled', version = version + 1
          where task_stage_id in (select id from task_stages where run_id = $1) and status = 'pending'`,
        [runId],
      );
      await holder.query(`update task_stages set status = 'canceled', version = version + 1 where run_id = $1 and status = 'pending'`, [
        runId,
      ]);
      advance = fx.advance(runId);
      await eventually(async () => {
        const { rows } = await pool.query<{ waiting: number }>(
          `select count(*)::int as waiting from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
        );
        return rows[0]?.waiting === 1 ? true : undefined;
      });
      await holder.query('commit');
    } finally {
      holder.release();
    }
    expect(await advance).toEqual([]);
    // As the cancel left it: nothing started, nothing moved twice.
    const after = await versionsOf(runId);
    expect(after.run).toEqual({ status: 'canceled', version: 2 });
    expect(after.stages.map(({ status, version }) => ({ status, version }))).toEqual([
      { status: 'canceled', version: 2 },
      { status: 'canceled', version: 2 },
    ]);
    expect(after.results).toEqual(Array.from({ length: 4 }, () => ({ status: 'canceled', version: 2, attempts: 0 })));
  });

  it('gives up after five reads where the run moved under every write, having written nothing, for the job to retry', async () => {
    const runId = await fx.createRun();
    const before = await versionsOf(runId);
    expect(before.run).toEqual({ status: 'pending', version: 1 });
    const pool = await nativePool(fx.orm.em);
    // Called between each read and its write (the run is pending: the advance plans it), this executor
    // moves the run's version as another writer would, every time.
    let plans = 0;
    const moving: RunExecutor = {
      plan: async (id) => {
        plans += 1;
        await pool.query('update runs set version = version + 1 where id = $1', [id]);
      },
      apply: async () => undefined,
    };
    await expect(fx.advance(runId, moving)).rejects.toThrow(`run ${runId} moved under 5 advances in a row; the job is retried`);
    expect(plans).toBe(5);
    // Only the other writer's five moves: no status, stage or result written by the advance.
    const after = await versionsOf(runId);
    expect(after).toEqual({ ...before, run: { status: 'pending', version: 6 } });
    // The job's retry, with the run left alone, takes the steps once.
    expect(await fx.advance(runId)).toHaveLength(2);
    const advanced = await versionsOf(runId);
    expect(advanced.run.status).toBe('post_plan_running');
    expect(advanced.stages.map(({ stage, status }) => [stage, status])).toEqual([
      ['post_plan', 'running'],
      ['pre_apply', 'pending'],
    ]);
  });

  it('ends the unstarted stages of a run that ended, without moving the run', async () => {
    const runId = await fx.createRun();
    const pool = await nativePool(fx.orm.em);
    // A run that ended with stages left pending (as no path of ours leaves it: every end takes them with it).
    await pool.query(`update runs set status = 'errored', version = version + 1 where id = $1`, [runId]);
    expect(await fx.advance(runId)).toEqual([]);
    const after = await versionsOf(runId);
    expect(after.run).toEqual({ status: 'errored', version: 2 });
    expect(after.stages.map(({ status }) => status)).toEqual(['canceled', 'canceled']);
    expect(after.results.map(({ status, attempts }) => ({ status, attempts }))).toEqual(
      Array.from({ length: 4 }, () => ({ status: 'canceled', attempts: 0 })),
    );
    // Nothing left to do: a second advance writes nothing.
    expect(await fx.advance(runId)).toEqual([]);
    expect(await versionsOf(runId)).toEqual(after);
  });
});
