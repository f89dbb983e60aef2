import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readdirSync } from 'node:fs';
import { newId } from '../src/domain/ids.ts';
import { holdsWorkspace, QUEUE_STATES, waitsInQueue } from '../src/domain/run-queue.ts';
import {
  ENFORCEMENT_LEVELS,
  FINAL_RUN_STATUSES,
  RUN_STAGES,
  RUN_STATUSES,
  TASK_RESULT_STATUSES,
  TASK_STAGE_STATUSES,
} from '../src/domain/statuses.ts';
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

  // The ORM's comparison sees these columns as text: what the domains allow is checked here instead.
  const DOMAIN_COLUMNS = [
    { table: 'runs', column: 'status', domain: 'run_status', values: RUN_STATUSES },
    { table: 'task_stages', column: 'stage', domain: 'run_stage', values: RUN_STAGES },
    { table: 'task_stages', column: 'status', domain: 'task_stage_status', values: TASK_STAGE_STATUSES },
    { table: 'task_results', column: 'stage', domain: 'run_stage', values: RUN_STAGES },
    { table: 'task_results', column: 'status', domain: 'task_result_status', values: TASK_RESULT_STATUSES },
    { table: 'task_results', column: 'enforcement_level', domain: 'enforcement_level', values: ENFORCEMENT_LEVELS },
  ] as const;

  it.each(DOMAIN_COLUMNS)(
    'checks the $column of $table by the domain $domain, which allows exactly the values the code knows',
    async (expected) => {
      const db = h.orm.em.fork().getConnection();
      const [column] = await db.execute<{ domain_name: string | null }[]>(
        `select domain_name from information_schema.columns where table_schema = current_schema() and table_name = ? and column_name = ?`,
        [expected.table, expected.column],
      );
      expect(column?.domain_name).toBe(expected.domain);
      const checks = await db.execute<{ definition: string }[]>(
        `select pg_get_constraintdef(c.oid) as definition from pg_constraint c join pg_type t on t.oid = c.contypid where t.typname = ?`,
        [expected.domain],
      );
      expect(checks).toHaveLength(1);
      const allowed = [...(checks[0]?.definition ?? '').matchAll(/'([^']*)'::text/g)].map((match) => match[1]);
      expect(allowed).toEqual([...expected.values]);
    },
  );

  it('moves the columns onto their domains without rewriting runs, task stages or task results', async () => {
    const f = await seedOrganization(h, 'schema-domains-migration');
    await createRun(h, f.organizationToken, f.workspaceId);
    const db = h.orm.em.fork().getConnection();
    const storage = async (): Promise<Record<string, string>> =>
      Object.fromEntries(
        (
          await db.execute<{ name: string; node: string }[]>(
            `select relname as name, pg_relation_filenode(oid)::text as node from pg_class
              where relname in ('runs', 'task_stages', 'task_results', 'task_stages_run_stage_unique')`,
          )
        ).map((row) => [row.name, row.node]),
      );
    await h.orm.migrator.down({ to: 'Migration20261124180000ResultStageTaskUnique' });
    const before = await storage();
    await h.orm.migrator.up({ to: 'Migration20261125000000StatusDomains' });
    // A domain created with its check would have made PostgreSQL write each table and its indexes anew.
    expect(await storage()).toEqual(before);
    expect(Object.keys(before)).toHaveLength(4);
    // Later migrations may rewrite a table for reasons of their own (the runs' generated columns).
    await h.orm.migrator.up();
  });

  it("keeps the runs' generated columns as the queue's and the sweeper's rules have them, for every status and queue state", async () => {
    const f = await seedOrganization(h, 'schema-run-standing');
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const db = h.orm.em.fork().getConnection();
    const seen: string[] = [];
    const expected: string[] = [];
    for (const queueState of [...QUEUE_STATES, null])
      for (const status of RUN_STATUSES) {
        const [row] = await db.execute<{ unfinished: boolean; holds_workspace: boolean | null; waits_in_queue: boolean | null }[]>(
          `update runs set status = ?, queue_state = ? where id = ? returning unfinished, holds_workspace, waits_in_queue`,
          [status, queueState, runId],
        );
        // Null (outside the queue) is as good as false to an index's predicate.
        seen.push(`${queueState} ${status}: ${row?.unfinished} ${row?.holds_workspace === true} ${row?.waits_in_queue === true}`);
        const run = { status, queueState };
        expected.push(`${queueState} ${status}: ${!FINAL_RUN_STATUSES.has(status)} ${holdsWorkspace(run)} ${waitsInQueue(run)}`);
      }
    expect(seen).toEqual(expected);
  });

  it('refuses a status, stage or enforcement level outside its domain, on insert and on update, and changes nothing', async () => {
    const f = await seedOrganization(h, 'schema-domains');
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    const db = h.orm.em.fork().getConnection();
    const stageId = newId('taskStage');
    const insertStage = `insert into task_stages (id, run_id, stage, created_at, updated_at) values (?, ?, ?, now(), now())`;
    await expect(db.execute(insertStage, [stageId, runId, 'mid_plan'])).rejects.toThrow(/run_stage_check/);
    await db.execute(insertStage, [stageId, runId, 'post_plan']);
    const insertResult = `insert into task_results (id, task_stage_id, task_id, task_name, task_url, enforcement_level, stage, created_at, updated_at)
       values (?, ?, 'task-domains', 'probe', 'https://tasks.example.com/', ?, 'post_plan', now(), now())`;
    const resultId = newId('taskResult');
    await expect(db.execute(insertResult, [resultId, stageId, 'optional'])).rejects.toThrow(/enforcement_level_check/);
    await db.execute(insertResult, [resultId, stageId, 'mandatory']);
    const ids: Record<string, string> = { runs: runId, task_stages: stageId, task_results: resultId };
    for (const { table, column, domain } of DOMAIN_COLUMNS) {
      const read = async (): Promise<unknown> =>
        (await db.execute<Record<string, unknown>[]>(`select "${column}" as value from "${table}" where id = ?`, [ids[table]]))[0]?.value;
      const before = await read();
      // A parameter typed text, as the hot path's statements pass them, is checked as it is stored.
      await expect(db.execute(`update "${table}" set "${column}" = ?::text where id = ?`, [`not-a-${column}`, ids[table]])).rejects.toThrow(
        new RegExp(`${domain}_check`),
      );
      expect(await read()).toBe(before);
    }
  });
});
