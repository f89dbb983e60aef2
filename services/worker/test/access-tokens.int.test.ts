import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CALLBACK_TOKEN_PREFIX } from '@runtasks/shared/security';
import { nativePool } from '@runtasks/shared/db';
import { type StartedResult, tokenOf } from '@runtasks/shared/engine';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface TokenColumns {
  id: string;
  status: string;
  callback_token_hash: string | null;
  callback_token_encrypted: string | null;
}

/**
 * A result's access token is issued when its run is planned, so that starting it changes no indexed
 * column; a result planned by an earlier version, which issued tokens as results started, still gets
 * one when it starts.
 */
describe('access tokens of task results', () => {
  let fx: AdvanceFixture;
  beforeAll(async () => {
    fx = await startAdvanceFixture('access-tokens', ['post_plan']);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const resultsOf = async (runId: string): Promise<TokenColumns[]> =>
    (
      await (
        await nativePool(fx.orm.em)
      ).query<TokenColumns>(
        `select tr.id, tr.status, tr.callback_token_hash, tr.callback_token_encrypted
           from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = $1 order by tr.id`,
        [runId],
      )
    ).rows;
  /** Each started result's token as its delivery sends it: bound to it, and the one whose hash is stored. */
  const expectDeliveredTokens = async (runId: string, started: readonly StartedResult[]): Promise<void> => {
    const rows = await resultsOf(runId);
    expect(started.map((result) => result.row.id).sort()).toEqual(rows.map((row) => row.id));
    for (const result of started) {
      const token = tokenOf(fx.h.secrets, result.row, result.issued);
      const row = rows.find((candidate) => candidate.id === result.row.id);
      expect(fx.h.secrets.isBoundTo(token, CALLBACK_TOKEN_PREFIX, result.row.id)).toBe(true);
      expect({ status: row?.status, hash: row?.callback_token_hash }).toEqual({ status: 'running', hash: fx.h.secrets.hashToken(token) });
    }
  };

  it('are issued when the run is planned, and starting a result keeps its token', async () => {
    const runId = await fx.createRun();
    const planned = await resultsOf(runId);
    expect(planned.map((row) => row.status)).toEqual(['pending', 'pending']);
    for (const row of planned) {
      expect(row.callback_token_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(fx.h.secrets.hashToken(fx.h.secrets.decrypt(row.callback_token_encrypted ?? ''))).toBe(row.callback_token_hash);
    }
    const started = await fx.advance(runId);
    // Nothing was issued as they started: their deliveries send the planned tokens.
    expect(started.map((result) => result.issued)).toEqual([undefined, undefined]);
    expect((await resultsOf(runId)).map((row) => row.callback_token_hash)).toEqual(planned.map((row) => row.callback_token_hash));
    await expectDeliveredTokens(runId, started);
  });

  it('are issued when a result planned without one starts', async () => {
    const runId = await fx.createRun();
    await (
      await nativePool(fx.orm.em)
    ).query(
      `update task_results set callback_token_hash = null, callback_token_encrypted = null
        where task_stage_id in (select id from task_stages where run_id = $1)`,
      [runId],
    );
    const started = await fx.advance(runId);
    expect(started.every((result) => result.issued !== undefined)).toBe(true);
    await expectDeliveredTokens(runId, started);
  });
});
