import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool, newId, type PreparedStatement } from '@runtasks/shared';
import type { PoolClient } from 'pg';
import { CALLBACK } from '../services/api/src/routes/callback.routes.ts';
import { ACKNOWLEDGE, CLAIM } from '../services/worker/src/engine/dispatch.ts';
import { createRun, seedOrganization } from './support/fixtures.ts';
import { startHarness, type Harness } from './support/harness.ts';

/**
 * The plans PostgreSQL makes for the hot statements on one task result, as a pool connection ends up
 * reusing them: generic (planned without the values), in a table whose statistics say, as they do in
 * production, that nearly every result is final. Each must probe the primary key; none may read the
 * deadline index, which would mean reading every open result and filtering by id (it is the sweeper's).
 * A database of its own: ANALYZE's statistics outlive the rolled-back transaction that took them.
 */
describe('plans of the statements on one task result', () => {
  let h: Harness;
  let client: PoolClient;
  beforeAll(async () => {
    h = await startHarness();
    const f = await seedOrganization(h, 'plans');
    const runId = await createRun(h, f.organizationToken, f.workspaceId);
    client = await (await nativePool(h.orm.em.fork())).connect();
    await client.query('begin');
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
  afterAll(async () => {
    try {
      await client?.query('rollback');
    } finally {
      client?.release();
      await h.close();
    }
  });

  const statements: [string, PreparedStatement][] = [
    ['a callback', CALLBACK],
    ['a delivery claim', CLAIM],
    ['acknowledgements', ACKNOWLEDGE],
  ];
  it.each(statements)('%s probes task_results by its primary key', async (_, statement) => {
    const parameters = Math.max(...[...statement.text.matchAll(/\$(\d+)/g)].map((match) => Number(match[1])));
    await client.query(`prepare probe_${statement.name.replaceAll('-', '_')} as ${statement.text}`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      `explain (costs off) execute probe_${statement.name.replaceAll('-', '_')}(${Array.from({ length: parameters }, () => 'null').join(', ')})`,
    );
    const plan = rows.map((row) => row['QUERY PLAN']).join('\n');
    expect(plan).toMatch(/(Index Scan using|Bitmap Index Scan on) task_results_pkey/);
    expect(plan).not.toContain('task_results_open_deadline_idx');
  });
});
