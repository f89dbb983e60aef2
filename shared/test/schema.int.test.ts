import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readdirSync } from 'node:fs';
import { newId } from '../src/domain/ids.ts';
import { MIGRATIONS } from '../src/db/migrations/index.ts';
import { createRun, seedOrganization } from '../../test/support/fixtures.ts';
import { startHarness, type Harness } from '../../test/support/harness.ts';

describe('schema', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h.close();
  });

  it('the checked-in migrations produce exactly the schema the entities describe', async () => {
    const drift = await h.orm.schema.getUpdateSchemaSQL({ wrap: false });
    expect(drift.trim()).toBe('');
  });

  it('lists every migration file in the migrations index', () => {
    const files = readdirSync(new URL('../src/db/migrations/', import.meta.url))
      .filter((file) => /^Migration\d+.*\.ts$/.test(file))
      .map((file) => file.replace(/\.ts$/, ''));
    expect(MIGRATIONS.map((migration) => migration.name).sort()).toEqual(files.sort());
  });

  it('has no pending migrations after the template was migrated', async () => {
    expect(await h.orm.migrator.getPending()).toEqual([]);
  });

  it('creates runs with an empty status-timestamps object, not a JSON string', async () => {
    const rows: { kind: string }[] = await h.orm.em
      .fork()
      .getConnection()
      .execute(
        `select column_default as kind from information_schema.columns where table_name = 'runs' and column_name = 'status_timestamps'`,
      );
    expect(rows[0]?.kind).toBe(`'{}'::jsonb`);
  });

  it('counts the open results of existing stages when the open-results migration runs, and the trigger keeps them after', async () => {
    const f = await seedOrganization(h, 'schema-open');
    const db = h.orm.em.fork().getConnection();
    const [org] = await db.execute<{ id: string }[]>(`select id from organizations where name = ?`, [f.organization]);
    for (let index = 0; index < 3; index += 1) {
      const taskId = newId('task');
      await db.execute(
        `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         values (?, ?, ?, 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now())`,
        [taskId, org?.id, `open-${index}`],
      );
      await db.execute(
        `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
         values (?, ?, ?, 'mandatory', '{post_plan}', now(), now())`,
        [newId('workspaceTask'), f.workspaceId, taskId],
      );
    }
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const open = async (): Promise<number> =>
      Number(
        (await db.execute<{ open_results: number }[]>(`select open_results from task_stages where run_id = ?`, [runId]))[0]?.open_results,
      );
    const results = (
      await db.execute<{ id: string }[]>(
        `select tr.id from task_results tr join task_stages ts on ts.id = tr.task_stage_id where ts.run_id = ? order by tr.id`,
        [runId],
      )
    ).map((row) => row.id);
    expect([results.length, await open()]).toEqual([3, 3]);
    await db.execute(`update task_results set status = 'passed' where id = ?`, [results[0]]);
    expect(await open()).toBe(2);
    // Before the migration, results end without a count; the migration counts what is open.
    await h.orm.migrator.down({ to: 'Migration20261123000000RunTaskCount' });
    await db.execute(`update task_results set status = 'errored' where id = ?`, [results[1]]);
    await h.orm.migrator.up();
    expect(await open()).toBe(1);
    await db.execute(`update task_results set status = 'canceled' where id = ?`, [results[2]]);
    expect(await open()).toBe(0);
  });

  it('refuses a hard deadline without a progress deadline (the sweeper finds expired results by the latter)', async () => {
    const f = await seedOrganization(h, 'schema-deadlines');
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const db = h.orm.em.fork().getConnection();
    const stageId = newId('taskStage');
    await db.execute(`insert into task_stages (id, run_id, stage, created_at, updated_at) values (?, ?, 'post_plan', now(), now())`, [
      stageId,
      runId,
    ]);
    const resultId = newId('taskResult');
    await db.execute(
      `insert into task_results (id, task_stage_id, task_id, task_name, task_url, enforcement_level, stage, created_at, updated_at)
       values (?, ?, 'task-deadlines', 'probe', 'https://tasks.example.com/', 'mandatory', 'post_plan', now(), now())`,
      [resultId, stageId],
    );
    await expect(db.execute(`update task_results set hard_deadline = now() where id = ?`, [resultId])).rejects.toThrow(
      /task_results_deadlines_check/,
    );
    await db.execute(`update task_results set progress_deadline = now(), hard_deadline = now() where id = ?`, [resultId]);
    await db.execute(`update task_results set progress_deadline = now() + interval '1 minute', hard_deadline = null where id = ?`, [
      resultId,
    ]);
  });
});
