import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { insertPlannedStages } from '@runtasks/shared/engine';
import { issueCallbackToken } from '@runtasks/shared/security';
import { nativePool } from '@runtasks/shared/db';
import { attachTask, createRun, createWorkspace, eventually, uniqueName } from '../../../test/support/fixtures.ts';
import { startAdvanceFixture, type AdvanceFixture } from './support/advance-fixture.ts';

interface PlannedRun {
  status: string;
  stages_planned: boolean;
  stages: number;
}

/**
 * A run's task stages are planned once, when it is created: what is attached to its workspace later is
 * for later runs, whenever a worker takes this one up. A run an earlier version created unplanned
 * (pending, no stages, no flag) is planned by its first advance, once.
 */
describe("a run's task stages are planned once", () => {
  let fx: AdvanceFixture;
  let taskIds: string[];
  beforeAll(async () => {
    fx = await startAdvanceFixture('run-planning', ['post_plan']);
    const { rows } = await (
      await nativePool(fx.orm.em)
    ).query<{ id: string }>(
      `select t.id from run_tasks t join organizations o on o.id = t.organization_id where o.name = $1 order by t.id`,
      [fx.f.organization],
    );
    taskIds = rows.map((row) => row.id);
    expect(taskIds).toHaveLength(2);
  });
  afterAll(async () => {
    await fx?.close();
  });

  const plannedRun = async (runId: string): Promise<PlannedRun | undefined> =>
    (
      await (
        await nativePool(fx.orm.em)
      ).query<PlannedRun>(
        `select r.status, r.stages_planned, (select count(*)::int from task_stages ts where ts.run_id = r.id) as stages from runs r where r.id = $1`,
        [runId],
      )
    ).rows[0];

  it('a run created with no tasks gets none from a task attached before a worker takes it up', async () => {
    const workspaceId = await createWorkspace(fx.h, fx.f.organization, fx.f.organizationToken, uniqueName('no-tasks'));
    const runId = await createRun(fx.h, fx.f.organizationToken, workspaceId);
    expect(await plannedRun(runId)).toEqual({ status: 'pending', stages_planned: true, stages: 0 });

    await attachTask(fx.h, fx.f, workspaceId, taskIds[0] ?? '', 'mandatory', ['post_plan']);
    // Before, this advance took the run for one created unplanned and planned a post_plan stage for it.
    expect(await fx.advance(runId)).toEqual([]);
    const advanced = await plannedRun(runId);
    expect(advanced?.stages).toBe(0);
    // No stages: planned at once by the default executor, and waiting for a confirmation (no auto-apply).
    expect(advanced?.status).toBe('planned');
  });

  it('a run created unplanned (by an earlier version) is planned by its first advance, once', async () => {
    const workspaceId = await createWorkspace(fx.h, fx.f.organization, fx.f.organizationToken, uniqueName('legacy'));
    const runId = await createRun(fx.h, fx.f.organizationToken, workspaceId);
    // As an earlier version left it: pending, no stages, no flag.
    await (await nativePool(fx.orm.em)).query(`update runs set stages_planned = false where id = $1`, [runId]);
    await attachTask(fx.h, fx.f, workspaceId, taskIds[0] ?? '', 'mandatory', ['post_plan']);

    await fx.advance(runId);
    const planned = await plannedRun(runId);
    expect(planned).toMatchObject({ stages_planned: true, stages: 1 });
    // A task attached afterwards is not planned into it by any later advance.
    await attachTask(fx.h, fx.f, workspaceId, taskIds[1] ?? '', 'mandatory', ['pre_apply']);
    await fx.advance(runId);
    expect((await plannedRun(runId))?.stages).toBe(1);
  });

  /** A run as an earlier version left it (pending, no stages, no flag) in a new workspace with the first task on post_plan. */
  async function unplannedRun(): Promise<{ runId: string; workspaceId: string }> {
    const workspaceId = await createWorkspace(fx.h, fx.f.organization, fx.f.organizationToken, uniqueName('unplanned'));
    const runId = await createRun(fx.h, fx.f.organizationToken, workspaceId);
    await (await nativePool(fx.orm.em)).query(`update runs set stages_planned = false where id = $1`, [runId]);
    await attachTask(fx.h, fx.f, workspaceId, taskIds[0] ?? '', 'mandatory', ['post_plan']);
    return { runId, workspaceId };
  }

  const rowsOf = async (runId: string): Promise<{ stages: string[]; results: string[] }> => {
    const pool = await nativePool(fx.orm.em);
    const stages = await pool.query<{ id: string }>(`select id from task_stages where run_id = $1 order by id`, [runId]);
    const results = await pool.query<{ id: string }>(
      `select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = $1 order by tr.id`,
      [runId],
    );
    return { stages: stages.rows.map((row) => row.id), results: results.rows.map((row) => row.id) };
  };

  it('a second insertPlannedStages call is a no-op: the same stages and results, no error', async () => {
    const { runId } = await unplannedRun();
    const client = await (await nativePool(fx.orm.em)).connect();
    try {
      const issue = (resultId: string) => issueCallbackToken(fx.h.secrets, resultId);
      const first = await insertPlannedStages(client, runId, issue);
      const planned = await rowsOf(runId);
      expect(planned.stages).toHaveLength(1);
      expect(planned.results).toHaveLength(1);
      const second = await insertPlannedStages(client, runId, issue);
      expect(second).toEqual(first);
      expect(await rowsOf(runId)).toEqual(planned);
    } finally {
      client.release();
    }
  });

  it('two planners at once: the one that waited for the run lock finds it planned and plans nothing', async () => {
    const { runId, workspaceId } = await unplannedRun();
    // The first planner, as repairPlanning does: the run's lock, the plan, the flag, still uncommitted.
    const first = await (await nativePool(fx.orm.em)).connect();
    try {
      await first.query('begin');
      await first.query('select id from runs where id = $1 for update', [runId]);
      await insertPlannedStages(first, runId, (resultId) => issueCallbackToken(fx.h.secrets, resultId));
      await first.query('update runs set stages_planned = true where id = $1', [runId]);
      // A task attached after that plan: it is for later runs, and a second plan would take it in.
      await attachTask(fx.h, fx.f, workspaceId, taskIds[1] ?? '', 'mandatory', ['pre_apply']);
      // The second planner read the run before the first committed, and waits for the lock.
      const second = fx.advance(runId);
      // Asked on another connection: inside first's transaction, pg_stat_activity stays as it first read it.
      await eventually(async () => {
        const { rows } = await (
          await nativePool(fx.orm.em)
        ).query<{ waiting: number }>(
          `select count(*)::int as waiting from pg_stat_activity where wait_event_type = 'Lock' and query like '%for update%' and datname = current_database()`,
        );
        return (rows[0]?.waiting ?? 0) > 0 || undefined;
      });
      await first.query('commit');
      await second;
    } finally {
      first.release();
    }
    const planned = await rowsOf(runId);
    expect(planned.stages).toHaveLength(1);
    expect(planned.results).toHaveLength(1);
    expect((await plannedRun(runId))?.stages_planned).toBe(true);
  });

  it('two advances at once on an unplanned run plan it once', async () => {
    const { runId } = await unplannedRun();
    await Promise.all([fx.advance(runId), fx.advance(runId)]);
    const planned = await rowsOf(runId);
    expect(planned.stages).toHaveLength(1);
    expect(planned.results).toHaveLength(1);
  });
});
