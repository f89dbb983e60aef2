import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared';
import { attachTask, createRun, createWorkspace, uniqueName } from '../../../test/support/fixtures.ts';
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
    expect(advanced?.status).not.toBe('pending');
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
});
