import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { CALLBACK_TOKEN_PREFIX } from '@runtasks/shared/security';
import { api, createRun, seedOrganization, type Fixture } from './support/fixtures.ts';
import { startHarness, type Harness } from './support/harness.ts';
import { checkInvariants } from './support/invariants.ts';

/**
 * A result's progress deadline never outlives its hard deadline: the invariants checker holds the
 * rule, and the code keeps it where a deadline is set, here with a progress timeout longer than the
 * maximum runtime: a start (at the run's creation) and a `running` callback.
 */
describe('progress deadline <= hard deadline', () => {
  let h: Harness;
  let f: Fixture;

  beforeAll(async () => {
    h = await startHarness({ env: { TASK_PROGRESS_TIMEOUT_SECONDS: '600', TASK_MAX_RUNTIME_SECONDS: '60' } });
    f = await seedOrganization(h, 'deadline-invariant');
    const connection = h.orm.em.fork().getConnection();
    const [org] = await connection.execute<{ id: string }[]>(`select id from organizations where name = ?`, [f.organization]);
    const taskId = newId('task');
    await connection.execute(
      `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
       values (?, ?, 'deadlines', 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now())`,
      [taskId, org?.id],
    );
    // On pre_plan: the run's creation starts the stage, its result running with both deadlines.
    await connection.execute(
      `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
       values (?, ?, ?, 'mandatory', '{pre_plan}', now(), now())`,
      [newId('workspaceTask'), f.workspaceId, taskId],
    );
  });

  afterAll(async () => {
    await h?.close();
  });

  /** The deadline rule's violations about this result (the rule looks at every result, whatever the runs asked for). */
  const deadlineViolations = async (runId: string, resultId: string): Promise<string[]> =>
    (await checkInvariants(h.orm, { runIds: [runId], checkPlan: false })).violations.filter(
      (line) => line.includes('(deadlines)') && line.includes(resultId),
    );

  const deadlinesOf = async (runId: string) => {
    const [row] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ id: string; status: string; within: boolean }[]>(
        `select tr.id, tr.status, tr.progress_deadline <= tr.hard_deadline as within
           from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ?`,
        [runId],
      );
    return row;
  };

  it('a result started at creation, then a running callback, keep the progress deadline within the hard one', async () => {
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const started = await deadlinesOf(runId);
    expect(started).toMatchObject({ status: 'running', within: true });
    expect(await deadlineViolations(runId, started?.id ?? '')).toEqual([]);

    const token = h.secrets.bindToken(CALLBACK_TOKEN_PREFIX, started?.id ?? '');
    await h.orm.em
      .fork()
      .getConnection()
      .execute('update task_results set callback_token_hash = ? where id = ?', [h.secrets.hashToken(token), started?.id]);
    const progress = await api(h, 'patch', `/task-results/${started?.id}/callback`, token, {
      data: { type: 'task-results', attributes: { status: 'running', message: 'still scanning' } },
    });
    expect(progress.status).toBe(200);
    expect(await deadlinesOf(runId)).toMatchObject({ status: 'running', within: true });
    expect(await deadlineViolations(runId, started?.id ?? '')).toEqual([]);
  });

  it('the invariants checker names a result whose progress deadline is after its hard deadline', async () => {
    // The first test's run still holds the workspace (the run queue): this run's stage starts once it ends.
    const [holder] = await h.orm.em
      .fork()
      .getConnection()
      .execute<{ id: string }[]>(`select id from runs where workspace_id = ? and status = 'pre_plan_running'`, [f.workspaceId]);
    if (holder) expect((await api(h, 'post', `/runs/${holder.id}/actions/cancel`, f.organizationToken)).status).toBe(202);
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const result = await deadlinesOf(runId);
    await h.orm.em
      .fork()
      .getConnection()
      .execute(`update task_results set progress_deadline = hard_deadline + interval '5 minutes' where id = ?`, [result?.id]);
    expect(await deadlineViolations(runId, result?.id ?? '')).toEqual([
      `task result ${result?.id}: its progress deadline is 300.0 s after its hard deadline (deadlines)`,
    ]);
  });
});
