import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { issueCallbackToken, nativePool, openOrm } from '@runtasks/shared';
import { advanceRun, type StartedResult } from '../src/engine/advance-run.ts';
import { ATTEMPT_LEASE_MS } from '../src/engine/dispatch.ts';
import { immediateExecutor } from '../src/engine/executor.ts';
import { attachTask, createRun, createTask, eventually, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startScriptedServer, type ScriptedServer } from '../../../test/support/scripted-server.ts';

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
  let h: Harness;
  let orm: MikroORM;
  let taskServer: ScriptedServer;
  let f: Fixture;
  beforeAll(async () => {
    h = await startHarness();
    orm = await openOrm(h.config.databaseUrl, 4);
    // Creating a task sends it a verification request; the advances here deliver nothing.
    taskServer = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    f = await seedOrganization(h, 'advance-lock');
    for (let index = 0; index < 2; index += 1)
      await attachTask(h, f, f.workspaceId, await createTask(h, f, taskServer.url), 'mandatory', ['pre_plan', 'post_plan']);
  });
  afterAll(async () => {
    await orm?.close();
    await taskServer?.close();
    await h?.close();
  });

  const advance = (runId: string): Promise<StartedResult[]> =>
    advanceRun(
      orm.em.fork(),
      runId,
      immediateExecutor,
      {
        progressTimeoutSeconds: 600,
        maxRuntimeSeconds: 3600,
        attemptLeaseSeconds: ATTEMPT_LEASE_MS / 1000,
        issueToken: (resultId) => issueCallbackToken(h.secrets, resultId),
      },
      { precheck: false },
    );

  /** Every version and status the advance writes: a second move of the same step would show in them. */
  const versionsOf = async (runId: string): Promise<Versions> => {
    const pool = await nativePool(orm.em);
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
    const alone = await createRun(h, f.organizationToken, f.workspaceId);
    expect(await advance(alone)).toHaveLength(2);
    const expected = await versionsOf(alone);
    expect(expected.results.filter((result) => result.status === 'running')).toHaveLength(2);

    const raced = await createRun(h, f.organizationToken, f.workspaceId);
    const pool = await nativePool(orm.em);
    const holder = await pool.connect();
    try {
      // Both advances start their statements (and take their snapshots) while the run is locked here.
      await holder.query('begin');
      await holder.query('select id from runs where id = $1 for update', [raced]);
      const advances = [advance(raced), advance(raced)];
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
