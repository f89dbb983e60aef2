import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { newId } from '@runtasks/shared/domain';
import type { ServerResponse } from 'node:http';
import { attachTask, createRun, createTask, seedOrganization } from '../../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../../test/support/harness.ts';
import { startScriptedServer, type Delivery, type ScriptedServer } from '../../../test/support/scripted-server.ts';
import {
  Acknowledgements,
  claimStartedAtCreation,
  deliverClaimed,
  dispatchResult,
  tokenOf,
  type DispatchDeps,
} from '@runtasks/shared/engine';

interface ResultRow {
  status: string;
  attempts: number;
  acknowledged: boolean;
  next_attempt_at: Date | null;
}

/**
 * What a delivery attempt leaves behind, on real results (a run created in its pre_plan stage, its
 * results running and due) delivered to a loopback task server whose answers each test scripts.
 */
describe('delivery attempts', () => {
  let h: Harness;
  let server: ScriptedServer;
  let respond: (delivery: Delivery, res: ServerResponse) => void = (_delivery, res) => res.writeHead(200).end();

  beforeAll(async () => {
    h = await startHarness();
    server = await startScriptedServer((delivery, res) => respond(delivery, res));
  });

  afterAll(async () => {
    await server?.close();
    await h?.close();
  });

  const sql = async <T extends object>(text: string, values: unknown[]): Promise<T[]> =>
    (await (await nativePool(h.orm.em)).query<T & Record<string, unknown>>(text, values)).rows;

  const deps = async (retryDelaysMs: number[]): Promise<DispatchDeps> => ({
    secrets: h.secrets,
    taskClient: h.taskClient,
    publicBaseUrl: h.config.publicBaseUrl,
    retryDelaysMs,
    acknowledgements: new Acknowledgements(await nativePool(h.orm.em)),
  });

  /** A run whose pre_plan stage started as it was created: one result, running, its first attempt due. */
  async function runningResult(): Promise<{ stageId: string; resultId: string }> {
    const f = await seedOrganization(h, `attempts-${newId('run').slice(-6)}`);
    await attachTask(h, f, f.workspaceId, await createTask(h, f, server.url), 'mandatory', ['pre_plan']);
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const [row] = await sql<{ stage_id: string; result_id: string }>(
      `select ts.id as stage_id, tr.id as result_id from task_stages ts join task_results tr on tr.task_stage_id = ts.id where ts.run_id = $1`,
      [runId],
    );
    expect(row).toBeDefined();
    return { stageId: row?.stage_id ?? '', resultId: row?.result_id ?? '' };
  }

  const resultRow = async (resultId: string): Promise<ResultRow | undefined> =>
    (
      await sql<ResultRow>(
        `select status, attempts, acknowledged_at is not null as acknowledged, next_attempt_at from task_results where id = $1`,
        [resultId],
      )
    )[0];

  it('keeps an excerpt of the answer without the access token the task server echoed, and without NUL', async () => {
    const { stageId, resultId } = await runningResult();
    // Echoes the request (token and all) with a NUL, which PostgreSQL refuses in text.
    respond = (delivery, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(`${delivery.body.toString('utf8')}\u0000tail`);
    const [claimed] = await claimStartedAtCreation(h.orm.em.fork(), stageId);
    expect(claimed?.id).toBe(resultId);
    const token = tokenOf(h.secrets, claimed!, undefined);
    expect(await deliverClaimed(h.orm.em.fork(), await deps([]), claimed!, token)).toEqual({ kind: 'acknowledged' });

    expect(server.deliveries.at(-1)?.payload.access_token).toBe(token);
    const [attempt] = await sql<{ response_excerpt: string }>(`select response_excerpt from delivery_attempts where task_result_id = $1`, [
      resultId,
    ]);
    expect(attempt?.response_excerpt).toContain('"access_token":"[redacted]"');
    expect(attempt?.response_excerpt).not.toContain(token);
    expect(attempt?.response_excerpt).toContain('\uFFFDtail');
    expect(await resultRow(resultId)).toMatchObject({ status: 'running', acknowledged: true });
  });

  /**
   * Attempt 1 stalls past its lease; the sweeper's re-drive delivers attempt 2, which the task server
   * acknowledges; then attempt 1's answer, a 500, arrives. It must leave the result as attempt 2 left it.
   */
  async function staleAttemptAfterRedrive(retryFits: boolean): Promise<{ stale: unknown; row: ResultRow | undefined }> {
    const retryDelaysMs = [60_000];
    const { stageId, resultId } = await runningResult();
    let releaseFirst: () => void = () => undefined;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstArrived: () => void = () => undefined;
    const firstReceived = new Promise<void>((resolve) => (firstArrived = resolve));
    respond = (delivery, res) => {
      if (delivery.attempt > 1) return void res.writeHead(200).end();
      firstArrived();
      void firstHeld.then(() => res.writeHead(500).end('overloaded'));
    };
    const [claimed] = await claimStartedAtCreation(h.orm.em.fork(), stageId);
    const first = deliverClaimed(h.orm.em.fork(), await deps(retryDelaysMs), claimed!, tokenOf(h.secrets, claimed!, undefined));
    await firstReceived;
    // Its lease runs out (as after a stall of 30 s): the re-drive may claim the result again.
    await sql(`update task_results set next_attempt_at = now() where id = $1`, [resultId]);
    // Where no retry fits, attempt 1 would end the result; where one does, it would schedule it.
    if (!retryFits) await sql(`update task_results set progress_deadline = now() + interval '10 seconds' where id = $1`, [resultId]);
    expect(await dispatchResult(h.orm.em.fork(), await deps(retryDelaysMs), resultId)).toEqual({ kind: 'acknowledged' });
    releaseFirst();
    return { stale: await first, row: await resultRow(resultId) };
  }

  it('a stalled attempt whose answer comes after a later attempt was acknowledged does not end the result', async () => {
    // No retry fits before the deadline: before, attempt 1 ended the result as errored.
    const { stale, row } = await staleAttemptAfterRedrive(false);
    expect(stale).toEqual({ kind: 'skipped' });
    expect(row).toMatchObject({ status: 'running', attempts: 2, acknowledged: true });
  });

  it('nor does it schedule another attempt of it', async () => {
    // Retries left: before, attempt 1 set the result's next attempt (and shortened attempt 2's lease).
    const { stale, row } = await staleAttemptAfterRedrive(true);
    expect(stale).toEqual({ kind: 'skipped' });
    expect(row).toMatchObject({ status: 'running', attempts: 2, acknowledged: true, next_attempt_at: null });
  });

  it('an attempt that is still the latest is retried, or ends the result when no retry fits', async () => {
    respond = (_delivery, res) => res.writeHead(503).end('busy');
    const retried = await runningResult();
    const [claimed] = await claimStartedAtCreation(h.orm.em.fork(), retried.stageId);
    expect(await deliverClaimed(h.orm.em.fork(), await deps([60_000]), claimed!, tokenOf(h.secrets, claimed!, undefined))).toEqual({
      kind: 'retry',
      attempt: 2,
      delayMs: 60_000,
    });
    expect((await resultRow(retried.resultId))?.next_attempt_at).not.toBeNull();

    // A retry after the progress deadline cannot fit: the result ends.
    const ended = await runningResult();
    const [late] = await claimStartedAtCreation(h.orm.em.fork(), ended.stageId);
    await sql(`update task_results set progress_deadline = now() + interval '10 seconds' where id = $1`, [ended.resultId]);
    const outcome = await deliverClaimed(h.orm.em.fork(), await deps([60_000]), late!, tokenOf(h.secrets, late!, undefined));
    expect(outcome).toMatchObject({ kind: 'final', status: 'errored' });
    expect(await resultRow(ended.resultId)).toMatchObject({ status: 'errored', attempts: 1 });
  });

  it('a stalled delivery job re-run after its lease ran out makes no attempt past the cap', async () => {
    respond = (_delivery, res) => res.writeHead(503).end('busy');
    const { stageId, resultId } = await runningResult();
    const retryDelaysMs = [0, 0];
    const [claimed] = await claimStartedAtCreation(h.orm.em.fork(), stageId);
    expect(
      await deliverClaimed(h.orm.em.fork(), await deps(retryDelaysMs), claimed!, tokenOf(h.secrets, claimed!, undefined)),
    ).toMatchObject({
      kind: 'retry',
      attempt: 2,
    });
    // Attempts 2 and 3 (the last of three) are claimed; the worker making attempt 3 stalls, and its lease runs out.
    expect((await dispatchResult(h.orm.em.fork(), await deps(retryDelaysMs), resultId)).kind).toBe('retry');
    await sql(`update task_results set attempts = 3, next_attempt_at = now() - interval '1 minute' where id = $1`, [resultId]);
    const delivered = server.deliveries.length;
    // Its job is re-run (BullMQ's stall check), and the sweeper re-drives it: neither may make a fourth attempt.
    expect(await dispatchResult(h.orm.em.fork(), await deps(retryDelaysMs), resultId)).toEqual({ kind: 'skipped' });
    expect(await dispatchResult(h.orm.em.fork(), await deps(retryDelaysMs), resultId)).toEqual({ kind: 'skipped' });
    expect(server.deliveries.length).toBe(delivered);
    expect(await resultRow(resultId)).toMatchObject({ status: 'running', attempts: 3 });
  });

  it.each([202, 204])(
    'a task server answering %i is not acknowledged: the request is retried, then the result ends errored',
    async (status) => {
      respond = (_delivery, res) => res.writeHead(status).end();
      const { stageId, resultId } = await runningResult();
      const retryDelaysMs = [0];
      const [claimed] = await claimStartedAtCreation(h.orm.em.fork(), stageId);
      expect(await deliverClaimed(h.orm.em.fork(), await deps(retryDelaysMs), claimed!, tokenOf(h.secrets, claimed!, undefined))).toEqual({
        kind: 'retry',
        attempt: 2,
        delayMs: 0,
      });
      expect(await resultRow(resultId)).toMatchObject({ status: 'running', acknowledged: false });
      expect(await dispatchResult(h.orm.em.fork(), await deps(retryDelaysMs), resultId)).toMatchObject({
        kind: 'final',
        status: 'errored',
      });
      expect(await resultRow(resultId)).toMatchObject({ status: 'errored', attempts: 2, acknowledged: false });
      const attempts = await sql<{ attempt: number; http_status: number }>(
        `select attempt, http_status from delivery_attempts where task_result_id = $1 order by attempt`,
        [resultId],
      );
      expect(attempts).toEqual([
        { attempt: 1, http_status: status },
        { attempt: 2, http_status: status },
      ]);
    },
  );
});
