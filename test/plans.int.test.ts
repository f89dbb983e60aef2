import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { newId } from '@runtasks/shared/domain';
import { nativePool, numbered, type PreparedStatement } from '@runtasks/shared/db';
import type { PoolClient } from 'pg';
import { CALLBACK } from '../services/api/src/routes/callback.routes.ts';
import { taskPageText } from '../services/api/src/routes/run-tasks.routes.ts';
import {
  ACKNOWLEDGE,
  Acknowledgements,
  CLAIM,
  CLAIM_STARTED_AT_CREATION,
  type DispatchRow,
  RUNS_SNAPSHOT_SQL,
  EXPIRE_IN_FLIGHT_SQL,
  EXPIRE_IN_STAGES_SQL,
  IDLE_RUNS_SQL,
  OVERDUE_DELIVERIES_SQL,
} from '@runtasks/shared/engine';
import { CLAIM_EVENTS } from '../services/worker/src/outbox-relay.ts';
import { startAdvanceFixture, type AdvanceFixture } from '../services/worker/test/support/advance-fixture.ts';
import { createRun, seedOrganization } from './support/fixtures.ts';
import { startHarness, type Harness } from './support/harness.ts';

/**
 * A harness database with one run, and a pool connection in a transaction that `seed` fills and the
 * describe's end rolls back. A database of its own: ANALYZE's statistics outlive the rollback.
 */
function inRolledBackTransaction(name: string, seed: (client: PoolClient, runId: string) => Promise<void>): () => PoolClient {
  let h: Harness | undefined;
  let client: PoolClient | undefined;
  beforeAll(async () => {
    h = await startHarness();
    const f = await seedOrganization(h, name);
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    client = await (await nativePool(h.orm.em.fork())).connect();
    await client.query('begin');
    await seed(client, runId);
  });
  afterAll(async () => {
    try {
      await client?.query('rollback');
    } finally {
      client?.release();
      await h?.close();
    }
  });
  return () => {
    if (!client) throw new Error('the transaction was not opened');
    return client;
  };
}

/**
 * The plans PostgreSQL makes for the hot statements on one task result, as a pool connection ends up
 * reusing them: generic (planned without the values), in a table whose statistics say, as they do in
 * production, that nearly every result is final. Each must probe the primary key, never read an index
 * of many results and filter them by id.
 */
describe('plans of the statements on one task result', () => {
  const connection = inRolledBackTransaction('plans', async (client, runId) => {
    const stageId = newId('taskStage');
    await client.query(`insert into task_stages (id, run_id, stage, created_at, updated_at) values ($1, $2, 'post_plan', now(), now())`, [
      stageId,
      runId,
    ]);
    await client.query(
      `insert into task_results (id, task_stage_id, task_id, task_name, task_url, enforcement_level, stage, status, created_at, updated_at)
       select 'probe-' || n, $1, 'probe-task-' || n, 'probe', 'https://tasks.example.com/', 'mandatory', 'post_plan', 'passed', now(), now()
         from generate_series(1, 3000) n`,
      [stageId],
    );
    await client.query('analyze task_results');
    await client.query('set local plan_cache_mode = force_generic_plan');
  });

  const statements: [string, PreparedStatement][] = [
    ['a callback', CALLBACK.withOutcomes],
    ['a callback without outcomes', CALLBACK.plain],
    ['a delivery claim', CLAIM],
    ['acknowledgements', ACKNOWLEDGE],
  ];
  it.each(statements)('%s probes task_results by its primary key', async (_, statement) => {
    const parameters = Math.max(...[...statement.text.matchAll(/\$(\d+)/g)].map((match) => Number(match[1])));
    const client = connection();
    await client.query(`prepare probe_${statement.name.replaceAll('-', '_')} as ${statement.text}`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (costs off) execute probe_${statement.name.replaceAll('-', '_')}(${Array.from({ length: parameters }, () => 'null').join(', ')})`,
    );
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/(Index Scan using|Bitmap Index Scan on) task_results_pkey/);
  });

  it("the claim of a stage started at its run's creation reads that stage's results by index", async () => {
    const client = connection();
    // The seed put every result in one stage; in production a stage holds a handful (here: a third as many stages as results).
    await client.query('alter table task_results alter column task_stage_id set (n_distinct = -0.3)');
    await client.query('analyze task_results');
    await client.query(`prepare probe_claim_created as ${CLAIM_STARTED_AT_CREATION.text}`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain (costs off) execute probe_claim_created(null, null)`);
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/(Index Scan using|Bitmap Index Scan on) task_results_stage_task_unique/);
    expect(plan).not.toContain('Seq Scan');
  });
});

/**
 * Prepared statements PostgreSQL would plan afresh at every execution: after five custom plans it keeps
 * planning for the values unless the generic plan looks no dearer (pg_prepared_statements counts both).
 * The task list's is checked in two databases: one whose statistics give an organization a thousand
 * tasks, and one where another organization's many tasks make every organization's look many (as after
 * the benchmark's 100,000-task organization), where a generic plan that priced the page's offset apart
 * from the custom plans lost to them at every execution.
 */
function describeTaskPages(title: string, otherOrganizationTasks: number): void {
  describe(title, () => {
    let h: Harness;
    let client: PoolClient;
    let organization: { id: string; name: string };
    beforeAll(async () => {
      h = await startHarness();
      const f = await seedOrganization(h, 'plans-tasks');
      client = await (await nativePool(h.orm.em.fork())).connect();
      // Seeding 20,000 tasks can outlast the pool's statement timeout on a loaded machine; the plans are the subject.
      await client.query('set statement_timeout = 0');
      const { rows } = await client.query<{ id: string; name: string }>(`select id, name from organizations where name = $1`, [
        f.organization,
      ]);
      organization = rows[0] as { id: string; name: string };
      const insertTasks = `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
         select $2 || lpad(n::text, 5, '0'), $1, $2 || lpad(n::text, 5, '0'), 'https://tasks.example.com/', 'task', true, false, '{}', 'advisory', now(), now()
           from generate_series(1, $3::int) n`;
      await client.query(insertTasks, [organization.id, 'plan-task-', 1000]);
      if (otherOrganizationTasks > 0) {
        const other = await seedOrganization(h, 'plans-many-tasks');
        const { rows: others } = await client.query<{ id: string }>(`select id from organizations where name = $1`, [other.organization]);
        await client.query(insertTasks, [others[0]?.id, 'plan-other-task-', otherOrganizationTasks]);
      }
      // A few of them attached to the workspace, as in any organization that uses its tasks.
      await client.query(
        `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
         select 'plan-wt-' || n, $1, 'plan-task-' || lpad(n::text, 5, '0'), 'mandatory', '{post_plan}', now(), now() from generate_series(1, 3) n`,
        [f.workspaceId],
      );
      await client.query('analyze run_tasks');
      await client.query('analyze workspace_tasks');
    }, 240_000);
    afterAll(async () => {
      client?.release();
      await h?.close();
    });

    it.each([20, 100])("an organization's task list, %i a page, is planned once per connection", async (size) => {
      const name = `task_page_${size}`;
      // As the API runs it: a named statement of the extended protocol, parsed once on this connection.
      for (let page = 1; page <= 10; page += 1) {
        const { rows } = await client.query({
          name,
          text: taskPageText(size),
          values: [organization.name, [organization.id], (page - 1) * size],
        });
        expect(rows.length).toBe(size);
        // Ids are zero-padded, so the page's first task is the one its offset names.
        expect(rows[0]?.name).toBe(`plan-task-${String((page - 1) * size + 1).padStart(5, '0')}`);
      }
      const { rows } = await client.query<{ generic_plans: string; custom_plans: string }>(
        `select generic_plans, custom_plans from pg_prepared_statements where name = $1`,
        [name],
      );
      // Five custom plans to learn what the values cost, then the generic plan for good.
      expect(rows[0]).toEqual({ generic_plans: '5', custom_plans: '5' });
    });
  });
}

describeTaskPages('statements that settle on a generic plan', 0);
describeTaskPages('statements that settle on a generic plan, beside an organization of 20,000 tasks', 20_000);

/**
 * The advance's write gets the results it starts as arrays, whose length a generic plan cannot know:
 * left to choose, PostgreSQL planned it for its values at every execution (~0.4 ms each). The same holds
 * for the acknowledgements, which take a batch's attempts as arrays. Both run on a pool of their own
 * whose sessions run generic plans that read by index (one connection here: pg_prepared_statements and
 * the cached plans are that pool's own).
 */
describe("the statements on the advances' pool (the advance's read and write, the acknowledgements)", () => {
  let fx: AdvanceFixture;
  beforeAll(async () => {
    // Two tasks at each stage; one connection per pool, so pg_prepared_statements shows the advances' own.
    fx = await startAdvanceFixture('plans-advance', ['post_plan', 'pre_apply'], 1);
  });
  afterAll(async () => {
    await fx?.close();
  });

  it('run their generic plans from the first execution, reading by index', async () => {
    let started = 0;
    const startedRows: DispatchRow[] = [];
    for (let run = 0; run < 8; run += 1) {
      // Starts the run's first stage and its two results: the write with every part (stage, results, run).
      // Each in a workspace of its own: one run at a time holds a workspace (the run queue).
      const runId = await fx.createRun();
      const results = await fx.advance(runId);
      started += results.length;
      startedRows.push(...results.map((result) => result.row));
    }
    expect(started).toBe(16);
    // The worker's acknowledgements, on the same pool: one statement per result, as when each arrives alone.
    const acknowledgements = new Acknowledgements(fx.advancePool);
    for (const row of startedRows) await acknowledgements.write([row.id, 1, new Date(), 5, 200, null, '']);
    const client = await fx.advancePool.connect();
    try {
      const { rows } = await client.query<{ name: string; generic_plans: string; custom_plans: string; parameters: number }>(
        `select name, generic_plans, custom_plans, cardinality(parameter_types) as parameters from pg_prepared_statements
          where name like 'advance-write%' or name in ('run-advance-read', $1) order by name`,
        [ACKNOWLEDGE.name],
      );
      expect(rows.map((row) => row.name)).toEqual(expect.arrayContaining(['run-advance-read', ACKNOWLEDGE.name]));
      const acknowledged = rows.find((row) => row.name === ACKNOWLEDGE.name);
      expect(Number(acknowledged?.generic_plans)).toBe(16);
      expect(rows.some((row) => row.name.startsWith('advance-write'))).toBe(true);
      for (const row of rows) expect({ name: row.name, custom: row.custom_plans }).toEqual({ name: row.name, custom: '0' });
      // Eight advances, each a read and a write.
      expect(rows.reduce((sum, row) => sum + Number(row.generic_plans), 0)).toBeGreaterThanOrEqual(16);
      // The plans the advances kept, as they run them (on their own session, whose settings make them
      // again the same way if PostgreSQL dropped them meanwhile). The tables are small here, as in a new
      // installation: a generic plan free to choose would scan them whole, and keep doing so as they grow.
      for (const row of rows) {
        const nulls = Array.from({ length: row.parameters }, () => 'null').join(', ');
        const plan = (await client.query<{ 'QUERY PLAN': string }>(`explain (costs off) execute "${row.name}"(${nulls})`)).rows
          .map((line) => line['QUERY PLAN'])
          .join('\n');
        expect({ name: row.name, seqScan: plan.includes('Seq Scan') }).toEqual({ name: row.name, seqScan: false });
      }
    } finally {
      client.release();
    }
  });
});

describe("the sweeper's queries", () => {
  // 3,000 finished runs beside the one in flight, each with a finished stage of two finished results, as
  // a long-lived installation has them.
  const connection = inRolledBackTransaction('plans-sweeper', async (client, runId) => {
    // Every column but those PostgreSQL generates, which an insert may not name.
    const { rows: written } = await client.query<{ name: string }>(
      `select quote_ident(column_name) as name from information_schema.columns
        where table_schema = current_schema() and table_name = 'runs' and is_generated = 'NEVER' order by ordinal_position`,
    );
    const columns = written.map((column) => column.name);
    await client.query(
      `insert into runs (${columns.join(', ')})
       select ${columns.map((column) => `done.${column}`).join(', ')} from runs r cross join generate_series(1, 3000) n,
         jsonb_populate_record(null::runs, to_jsonb(r) || jsonb_build_object('id', 'run-done-' || n, 'plan_id', 'plan-done-' || n, 'apply_id', 'apply-done-' || n, 'status', 'applied')) done
        where r.id = $1`,
      [runId],
    );
    await client.query(
      `insert into task_stages (id, run_id, stage, status, created_at, updated_at)
       select 'stage-done-' || n, 'run-done-' || n, 'post_plan', 'passed', now(), now() from generate_series(1, 3000) n`,
    );
    await client.query(
      `insert into task_results (id, task_stage_id, task_id, task_name, task_url, enforcement_level, stage, status, created_at, updated_at)
       select 'result-done-' || n || '-' || k, 'stage-done-' || n, 'task-' || k, 'done', 'https://tasks.example.com/', 'mandatory', 'post_plan', 'passed', now(), now()
         from generate_series(1, 3000) n cross join generate_series(1, 2) k`,
    );
    for (const table of ['runs', 'task_stages', 'task_results']) await client.query(`analyze ${table}`);
  });
  /** The plan of `sql` with its parameters ($1, $2, …) given as these SQL literals. */
  const planOf = async (sql: string, literals: readonly string[]): Promise<string> =>
    (
      await connection().query<{ 'QUERY PLAN': string }>(
        `explain (costs off) ${numbered(sql).replace(/\$(\d+)/g, (_, index: string) => literals[Number(index) - 1] ?? '')}`,
      )
    ).rows
      .map((line) => line['QUERY PLAN'])
      .join('\n');

  // The idle runs' page: 30 s of grace, after a cursor (its created_at twice, its id), 500 at a time.
  const cursorAt = `'2026-01-01 00:00:00.123456+00'`;
  it.each([
    ['idle runs', IDLE_RUNS_SQL, ['30', cursorAt, cursorAt, `'run-x'`, '500']],
    ['expired results', EXPIRE_IN_FLIGHT_SQL, []],
    ['overdue deliveries', OVERDUE_DELIVERIES_SQL, ['30', '5']],
  ])("reach the %s through the unfinished runs' index, never reading every run or result", async (_, sql, literals) => {
    const plan = await planOf(sql, literals);
    expect(plan).toContain('runs_unfinished_idx');
    expect(plan).not.toContain('Seq Scan');
  });

  it("end a deadline job's stages' due results, found by index, never reading every result", async () => {
    const plan = await planOf(EXPIRE_IN_STAGES_SQL, [`array['stage-done-1', 'stage-done-2']`]);
    expect(plan).toContain('task_results_stage_task_unique');
    expect(plan).not.toContain('Seq Scan');
  });

  it('read the snapshots of a page of idle runs by index, never every stage or result', async () => {
    const plan = await planOf(RUNS_SNAPSHOT_SQL, [`array['run-x', 'run-y', 'run-z']`]);
    expect(plan).toContain('runs_pkey');
    expect(plan).not.toContain('Seq Scan');
  });

  it("start a page of idle runs at its cursor in the unfinished runs' index, not at the oldest run", async () => {
    const plan = await planOf(IDLE_RUNS_SQL, ['30', cursorAt, cursorAt, `'run-x'`, '500']);
    expect(plan).toMatch(/Index Cond: .*created_at >= /);
  });
});

/**
 * The outbox relay claims (and marks) the oldest unpublished events for every run and stage, in a
 * table that keeps every published event for seven days: its generic plan must read only the
 * unpublished ones, through their partial index.
 */
describe("a run's status changes", () => {
  let runId = '';
  const connection = inRolledBackTransaction('plans-run-hot', async (client, id) => {
    runId = id;
    await client.query(`update runs set queue_state = 'holding', status = 'pre_plan_running' where id = $1`, [runId]);
  });
  /** The updates of runs in this transaction so far, and how many of them were HOT (no index entry written). */
  const updates = async (): Promise<{ all: number; hot: number }> => {
    const { rows } = await connection().query<{ all: string; hot: string }>(
      `select n_tup_upd as all, n_tup_hot_upd as hot from pg_stat_xact_user_tables where relname = 'runs'`,
    );
    return { all: Number(rows[0]?.all), hot: Number(rows[0]?.hot) };
  };
  const changeStatus = (status: string) =>
    connection().query(
      `update runs set status = $2::text, updated_at = now(), version = version + 1,
              status_timestamps = status_timestamps || jsonb_build_object($2::text || '-at', now()::text) where id = $1`,
      [runId, status],
    );

  it('write no index entry while the run is in flight (HOT updates), and one in each index when it ends', async () => {
    const before = await updates();
    for (const status of ['planning', 'post_plan_running', 'planned']) await changeStatus(status);
    const inFlight = await updates();
    expect(inFlight.all - before.all).toBe(3);
    expect(inFlight.hot - before.hot).toBe(3);
    // Its end changes what the sweeper's and the queue's indexes hold.
    await changeStatus('errored');
    const ended = await updates();
    expect(ended.all - inFlight.all).toBe(1);
    expect(ended.hot - inFlight.hot).toBe(0);
  });
});

describe("the outbox relay's claim", () => {
  const connection = inRolledBackTransaction('plans-outbox', async (client) => {
    await client.query(
      `insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts, published_at)
       select 'run.advance', 'run-' || n, jsonb_build_object('runId', 'run-' || n), now(), 1, now() from generate_series(1, 3000) n`,
    );
    await client.query('analyze outbox_events');
    await client.query('set local plan_cache_mode = force_generic_plan');
  });

  it('reads the unpublished events by their index, never every event', async () => {
    const client = connection();
    await client.query(`prepare probe_outbox_claim as ${CLAIM_EVENTS.text}`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>('explain (costs off) execute probe_outbox_claim(100)');
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toContain('outbox_events_unpublished_idx');
    expect(plan).not.toContain('Seq Scan');
  });
});
