import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MikroORM } from '@mikro-orm/postgresql';
import { CALLBACK_TOKEN_PREFIX, issueCallbackToken, nativePool, openOrm } from '@runtasks/shared';
import { advanceRun, type StartedResult } from '../src/engine/advance-run.ts';
import { ATTEMPT_LEASE_MS, tokenOf } from '../src/engine/dispatch.ts';
import { immediateExecutor } from '../src/engine/executor.ts';
import { attachTask, createRun, createTask, seedOrganization, type Fixture } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startScriptedServer, type ScriptedServer } from '../../../test/support/scripted-server.ts';

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
  let h: Harness;
  let orm: MikroORM;
  let taskServer: ScriptedServer;
  let f: Fixture;
  beforeAll(async () => {
    h = await startHarness();
    orm = await openOrm(h.config.databaseUrl, 2);
    // Creating a task sends it a verification request; the advances here deliver nothing.
    taskServer = await startScriptedServer((_delivery, res) => res.writeHead(200).end());
    f = await seedOrganization(h, 'access-tokens');
    for (let index = 0; index < 2; index += 1)
      await attachTask(h, f, f.workspaceId, await createTask(h, f, taskServer.url), 'mandatory', ['pre_plan']);
  });
  afterAll(async () => {
    await orm?.close();
    await taskServer?.close();
    await h?.close();
  });

  const resultsOf = async (runId: string): Promise<TokenColumns[]> =>
    (
      await (
        await nativePool(orm.em)
      ).query<TokenColumns>(
        `select tr.id, tr.status, tr.callback_token_hash, tr.callback_token_encrypted
           from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = $1 order by tr.id`,
        [runId],
      )
    ).rows;
  const start = (runId: string): Promise<StartedResult[]> =>
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
  /** Each started result's token as its delivery sends it: bound to it, and the one whose hash is stored. */
  const expectDeliveredTokens = async (runId: string, started: readonly StartedResult[]): Promise<void> => {
    const rows = await resultsOf(runId);
    expect(started.map((result) => result.row.id).sort()).toEqual(rows.map((row) => row.id));
    for (const result of started) {
      const token = tokenOf(h.secrets, result.row, result.issued);
      const row = rows.find((candidate) => candidate.id === result.row.id);
      expect(h.secrets.isBoundTo(token, CALLBACK_TOKEN_PREFIX, result.row.id)).toBe(true);
      expect({ status: row?.status, hash: row?.callback_token_hash }).toEqual({ status: 'running', hash: h.secrets.hashToken(token) });
    }
  };

  it('are issued when the run is planned, and starting a result keeps its token', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const planned = await resultsOf(runId);
    expect(planned.map((row) => row.status)).toEqual(['pending', 'pending']);
    for (const row of planned) {
      expect(row.callback_token_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(h.secrets.hashToken(h.secrets.decrypt(row.callback_token_encrypted ?? ''))).toBe(row.callback_token_hash);
    }
    const started = await start(runId);
    // Nothing was issued as they started: their deliveries send the planned tokens.
    expect(started.map((result) => result.issued)).toEqual([undefined, undefined]);
    expect((await resultsOf(runId)).map((row) => row.callback_token_hash)).toEqual(planned.map((row) => row.callback_token_hash));
    await expectDeliveredTokens(runId, started);
  });

  it('are issued when a result planned without one starts', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    await (
      await nativePool(orm.em)
    ).query(
      `update task_results set callback_token_hash = null, callback_token_encrypted = null
        where task_stage_id in (select id from task_stages where run_id = $1)`,
      [runId],
    );
    const started = await start(runId);
    expect(started.every((result) => result.issued !== undefined)).toBe(true);
    await expectDeliveredTokens(runId, started);
  });
});
