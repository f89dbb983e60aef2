import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { CLAIM, claimStartedAtCreation, ATTEMPT_LEASE_MS, sweep, tokenOf, type DispatchRow } from '@runtasks/shared/engine';
import { CALLBACK_TOKEN_PREFIX } from '@runtasks/shared/security';
import { api, attachTask, createRun, createTask, eventually, seedOrganization } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startScriptedServer, type ScriptedServer } from '../../../test/support/scripted-server.ts';
import { startWorker, type RunningWorker } from '../src/worker.ts';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface Claimable {
  id: string;
  status: string;
  attempts: number;
}

/**
 * A run with pre_plan tasks is created with that stage started and its results due, unclaimed: its
 * `run.created` job claims their first attempts once, whoever else (a duplicated job, the sweeper's
 * re-drive of a lost one) tries too.
 */
describe('the first attempts of a stage started as its run was created', () => {
  let fx: AdvanceFixture;
  beforeAll(async () => {
    fx = await startAdvanceFixture('created-stage', ['pre_plan']);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const stageOf = async (runId: string): Promise<string> => {
    const { rows } = await (await nativePool(fx.orm.em)).query<{ id: string }>(`select id from task_stages where run_id = $1`, [runId]);
    expect(rows).toHaveLength(1);
    return rows[0]?.id ?? '';
  };
  const resultsOf = async (stageId: string): Promise<Claimable[]> =>
    (
      await (
        await nativePool(fx.orm.em)
      ).query<Claimable>(`select id, status, attempts from task_results where task_stage_id = $1 order by id`, [stageId])
    ).rows;

  it('are claimed once: a second claim (a duplicated job) finds nothing', async () => {
    const stageId = await stageOf(await fx.createRun());
    expect((await resultsOf(stageId)).map((row) => [row.status, row.attempts])).toEqual([
      ['running', 0],
      ['running', 0],
    ]);
    const claimed = await claimStartedAtCreation(fx.orm.em.fork(), stageId);
    // With what their payloads need, and leased for one attempt each.
    // Their access tokens are derived from their ids: nothing stored, and each delivery sends its result's own.
    const ownToken = (row: DispatchRow): boolean =>
      fx.h.secrets.derivedSubject(tokenOf(fx.h.secrets, row, undefined), CALLBACK_TOKEN_PREFIX) === row.id &&
      row.callback_token_encrypted === null;
    expect(claimed.map((row) => [row.stage, row.attempts, ownToken(row)]).sort()).toEqual([
      ['pre_plan', 1, true],
      ['pre_plan', 1, true],
    ]);
    expect(claimed.map((row) => row.id).sort()).toEqual((await resultsOf(stageId)).map((row) => row.id));
    expect(await claimStartedAtCreation(fx.orm.em.fork(), stageId)).toEqual([]);
    expect((await resultsOf(stageId)).map((row) => row.attempts)).toEqual([1, 1]);
  });

  it("share each first attempt with the sweeper's re-drive: whichever claims it first delivers it", async () => {
    const stageId = await stageOf(await fx.createRun());
    // The run's job is late: the sweeper finds both results due (no grace here) and re-drives them.
    const { resultIds } = await sweep(fx.orm.em.fork(), 0);
    const due = (await resultsOf(stageId)).map((row) => row.id);
    expect(resultIds.filter((result) => due.includes(result.id))).toEqual(expect.arrayContaining(due.map((id) => ({ id, attempt: 1 }))));
    // One re-drive claims its result first (dispatch's CLAIM, as dispatchResult runs it) …
    const [first, second] = due;
    const pool = await nativePool(fx.orm.em);
    const redriven = await pool.query(CLAIM.text, [ATTEMPT_LEASE_MS / 1000, null, null, first, 3]);
    expect(redriven.rowCount).toBe(1);
    // … so the run's job claims only the other one.
    expect((await claimStartedAtCreation(fx.orm.em.fork(), stageId)).map((row) => row.id)).toEqual([second]);
    expect((await resultsOf(stageId)).map((row) => row.attempts)).toEqual([1, 1]);
  });

  it('are never claimed once the run was canceled', async () => {
    const runId = await fx.createRun();
    const stageId = await stageOf(runId);
    expect((await api(fx.h, 'post', `/runs/${runId}/actions/cancel`, fx.f.organizationToken)).status).toBe(202);
    expect(await claimStartedAtCreation(fx.orm.em.fork(), stageId)).toEqual([]);
    expect((await resultsOf(stageId)).map((row) => [row.status, row.attempts])).toEqual([
      ['canceled', 0],
      ['canceled', 0],
    ]);
  });
});

describe('a run created in its pre_plan stage, with a worker running', () => {
  // The sweeper would deliver a stage its job left alone, but not for twenty minutes here: what arrives
  // within the deadline below was delivered by the run.created job's claim.
  let h: Harness;
  let worker: RunningWorker;
  let server: ScriptedServer;
  beforeAll(async () => {
    h = await startHarness({ env: { SWEEPER_INTERVAL_SECONDS: '600' } });
    server = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    worker = await startWorker({ config: h.config, orm: h.orm, logger: h.logger, secrets: h.secrets, taskClient: h.taskClient });
  });
  afterAll(async () => {
    await worker?.close();
    await server?.close();
    await h?.close();
  });

  it('has its results delivered by its run.created job, once each, without waiting for the sweeper', async () => {
    const f = await seedOrganization(h, 'created-stage-e2e');
    for (let index = 0; index < 2; index += 1)
      await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url), 'mandatory', ['pre_plan']);
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const pool = await nativePool(h.orm.em);
    const acknowledged = await eventually(async () => {
      const { rows } = await pool.query<{ id: string; attempts: number }>(
        `select tr.id, tr.attempts from task_results tr join task_stages ts on ts.id = tr.task_stage_id
          where ts.run_id = $1 and tr.acknowledged_at is not null order by tr.id`,
        [runId],
      );
      return rows.length === 2 ? rows : undefined;
    }, 5_000);
    expect(acknowledged.map((row) => row.attempts)).toEqual([1, 1]);
    const delivered = server.deliveries.filter((delivery) => delivery.payload.run_id === runId);
    expect(delivered.map((delivery) => [delivery.payload.task_result_id, delivery.attempt]).sort()).toEqual(
      acknowledged.map((row) => [row.id, 1]),
    );
  });
});
