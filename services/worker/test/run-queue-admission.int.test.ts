import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import { sweep } from '@runtasks/shared/engine';
import { createRun, createWorkspace, uniqueName, attachTask } from '../../../test/support/fixtures.ts';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface QueueRow {
  id: string;
  status: string;
  queue_state: string | null;
}

/**
 * Admission of the next queued run of a workspace, with no worker and no sweeper running (the test
 * makes each advance and each sweep itself): what admits a run is exactly the call that should. The
 * suites with a worker run the sweeper every half second, which would hide a missing admission there
 * (with the default 15 s interval, a user would wait that long).
 */
describe('admission of queued runs', () => {
  let fx: AdvanceFixture;
  let taskIds: string[];
  beforeAll(async () => {
    fx = await startAdvanceFixture('queue-admission', ['pre_plan']);
    taskIds = (
      await (
        await nativePool(fx.orm.em)
      ).query<{ task_id: string }>(`select task_id from workspace_tasks where workspace_id = $1`, [fx.f.workspaceId])
    ).rows.map((row) => row.task_id);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const sql = async <T extends object>(text: string, values: unknown[] = []): Promise<T[]> =>
    (await (await nativePool(fx.orm.em)).query<T & Record<string, unknown>>(text, values)).rows;

  /** A workspace of its own with the fixture's two mandatory pre_plan tasks, and `count` runs created in order. */
  async function workspaceWithRuns(count: number): Promise<{ workspaceId: string; runIds: string[] }> {
    const workspaceId = await createWorkspace(fx.h, fx.f.organization, fx.f.organizationToken, uniqueName('queue-ws'));
    for (const taskId of taskIds) await attachTask(fx.h, fx.f, workspaceId, taskId, 'mandatory', ['pre_plan']);
    const runIds: string[] = [];
    for (let index = 0; index < count; index += 1) runIds.push(await createRun(fx.h, fx.f.organizationToken, workspaceId));
    return { workspaceId, runIds };
  }

  const queueOf = async (runIds: readonly string[]): Promise<(string | null)[]> => {
    const rows = await sql<QueueRow>(`select id, status, queue_state from runs where id = any($1::text[])`, [runIds]);
    return runIds.map((id) => rows.find((row) => row.id === id)?.queue_state ?? null);
  };

  const wakeUps = async (runId: string): Promise<number> =>
    Number(
      (await sql<{ n: string }>(`select count(*) as n from outbox_events where topic = 'run.advance' and aggregate_id = $1`, [runId]))[0]
        ?.n,
    );

  /** Ends the holder as a worker does: its mandatory results failed, its advance errors the run (and releases the workspace). */
  async function endByAdvance(runId: string): Promise<void> {
    await sql(`update task_results set status = 'failed' where task_stage_id in (select id from task_stages where run_id = $1)`, [runId]);
    await fx.advance(runId);
    expect((await sql<{ status: string }>(`select status from runs where id = $1`, [runId]))[0]?.status).toBe('errored');
  }

  it('admits the next queued run as soon as the advance that ended its holder returns, with its wake-up', async () => {
    const { runIds } = await workspaceWithRuns(2);
    const [holder, next] = runIds as [string, string];
    expect(await queueOf(runIds)).toEqual(['holding', 'queued']);
    expect(await wakeUps(next)).toBe(0);
    await endByAdvance(holder);
    // No sweeper ran: the advance's own release admitted it.
    expect(await queueOf([next])).toEqual(['holding']);
    expect(await wakeUps(next)).toBe(1);
  });

  it('admits queued runs in the order they were created', async () => {
    const { runIds } = await workspaceWithRuns(4);
    const [first, second, third, fourth] = runIds as [string, string, string, string];
    expect(await queueOf(runIds)).toEqual(['holding', 'queued', 'queued', 'queued']);
    await endByAdvance(first);
    expect(await queueOf(runIds)).toEqual(['holding', 'holding', 'queued', 'queued']);
    await endByAdvance(second);
    expect(await queueOf([third, fourth])).toEqual(['holding', 'queued']);
  });

  it('the sweeper admits a queued run that a release left unadmitted', async () => {
    const { runIds } = await workspaceWithRuns(2);
    const [holder, next] = runIds as [string, string];
    // The holder ended, and its process died before admitting the next (written directly: no admission).
    await sql(`update runs set status = 'errored' where id = $1`, [holder]);
    expect(await queueOf([next])).toEqual(['queued']);
    await sweep(fx.orm.em.fork(), 30);
    expect(await queueOf([next])).toEqual(['holding']);
    expect(await wakeUps(next)).toBe(1);
    // A second pass admits nothing more (the run holds the workspace now).
    await sweep(fx.orm.em.fork(), 30);
    expect(await wakeUps(next)).toBe(1);
  });
});
