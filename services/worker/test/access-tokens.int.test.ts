import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CALLBACK_TOKEN_PREFIX } from '@runtasks/shared/security';
import { nativePool } from '@runtasks/shared/db';
import { tokenOf } from '@runtasks/shared/engine';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface TokenColumns {
  id: string;
  status: string;
  callback_token_hash: string | null;
  callback_token_encrypted: string | null;
}

/**
 * A result's access token is derived from its id under the server's secret (issue 47): planning and
 * starting a result store nothing for it, and every delivery sends the same one. A result planned by an
 * earlier version, with a token stored for it, keeps that one.
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

  it('are derived from the result: nothing is stored as the run is planned or started', async () => {
    const runId = await fx.createRun();
    const planned = await resultsOf(runId);
    expect(planned.map((row) => [row.status, row.callback_token_hash, row.callback_token_encrypted])).toEqual([
      ['pending', null, null],
      ['pending', null, null],
    ]);
    const started = await fx.advance(runId);
    expect(started.map((result) => result.row.id).sort()).toEqual(planned.map((row) => row.id));
    for (const result of started) {
      const token = tokenOf(fx.h.secrets, result.row, result.issued);
      // The result's own, the same at every delivery, and no other result's.
      expect(fx.h.secrets.derivedSubject(token, CALLBACK_TOKEN_PREFIX)).toBe(result.row.id);
      expect(tokenOf(fx.h.secrets, result.row, undefined)).toBe(token);
      expect(token).not.toBe(fx.h.secrets.deriveToken(CALLBACK_TOKEN_PREFIX, planned.find((row) => row.id !== result.row.id)?.id ?? ''));
    }
    expect((await resultsOf(runId)).map((row) => [row.status, row.callback_token_hash, row.callback_token_encrypted])).toEqual([
      ['running', null, null],
      ['running', null, null],
    ]);
  });

  it('stored for a result planned by an earlier version are the ones it keeps sending', async () => {
    const runId = await fx.createRun();
    const stored = new Map<string, string>();
    for (const row of await resultsOf(runId)) {
      const token = fx.h.secrets.bindToken(CALLBACK_TOKEN_PREFIX, row.id);
      stored.set(row.id, token);
      await (
        await nativePool(fx.orm.em)
      ).query(`update task_results set callback_token_hash = $2, callback_token_encrypted = $3 where id = $1`, [
        row.id,
        fx.h.secrets.hashToken(token),
        fx.h.secrets.encrypt(token),
      ]);
    }
    const started = await fx.advance(runId);
    expect(started).toHaveLength(2);
    for (const result of started) {
      expect(tokenOf(fx.h.secrets, result.row, result.issued)).toBe(stored.get(result.row.id));
      const row = (await resultsOf(runId)).find((candidate) => candidate.id === result.row.id);
      expect({ status: row?.status, hash: row?.callback_token_hash }).toEqual({
        status: 'running',
        hash: fx.h.secrets.hashToken(stored.get(result.row.id) ?? ''),
      });
      const planJson = await fx.h.http
        .get(`/api/v2/runs/${runId}/plan/json-output`)
        .set('Authorization', `Bearer ${stored.get(result.row.id) ?? ''}`);
      expect(planJson.status).toBe(200);
      // A token derived for a result that has a stored one is not its token.
      const derived = fx.h.secrets.deriveToken(CALLBACK_TOKEN_PREFIX, result.row.id);
      expect((await fx.h.http.get(`/api/v2/runs/${runId}/plan/json-output`).set('Authorization', `Bearer ${derived}`)).status).toBe(401);
    }
  });

  it("read their run's plan JSON only before their result's hard deadline", async () => {
    const runId = await fx.createRun();
    const started = await fx.advance(runId);
    const [result] = started;
    const token = tokenOf(fx.h.secrets, result!.row, result!.issued);
    const planJson = () => fx.h.http.get(`/api/v2/runs/${runId}/plan/json-output`).set('Authorization', `Bearer ${token}`);
    expect((await planJson()).status).toBe(200);
    // Still running (no sweeper here to end it), with its hard deadline passed: the token is dead.
    await (
      await nativePool(fx.orm.em)
    ).query(
      `update task_results set progress_deadline = now() - interval '1 second', hard_deadline = now() - interval '1 second' where id = $1`,
      [result!.row.id],
    );
    expect((await resultsOf(runId)).find((row) => row.id === result!.row.id)?.status).toBe('running');
    const refused = await planJson();
    expect(refused.status).toBe(401);
    expect(JSON.stringify(refused.body)).not.toContain('resource_changes');
  });
});
