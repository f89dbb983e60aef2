import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { nativePool } from '@runtasks/shared/db';
import type { PoolClient } from 'pg';
import { taskPageText } from '../services/api/src/routes/run-tasks.routes.ts';
import { seedOrganization } from './support/fixtures.ts';
import { startHarness, type Harness } from './support/harness.ts';

interface PlanNode {
  'Relation Name'?: string;
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

/**
 * Where a few tasks are attached to many workspaces, a generic plan prices a per-task lookup of
 * workspace_tasks at the table's average (hundreds of rows) and scans the table for every task of the
 * page. The page reads workspace_tasks in one pass instead, whatever the plan.
 */
describe("the task list's generic plan, with three tasks attached to 200 workspaces", () => {
  let h: Harness;
  let client: PoolClient;
  let organization: { id: string; name: string };
  beforeAll(async () => {
    h = await startHarness();
    const f = await seedOrganization(h, 'plan-wide-tasks');
    client = await (await nativePool(h.orm.em.fork())).connect();
    const { rows } = await client.query<{ id: string; name: string }>(`select id, name from organizations where name = $1`, [
      f.organization,
    ]);
    organization = rows[0] as { id: string; name: string };
    await client.query(
      `insert into run_tasks (id, organization_id, name, url, category, enabled, global_enabled, global_stages, global_enforcement_level, created_at, updated_at)
       select 'wide-task-' || lpad(n::text, 5, '0'), $1, 'wide-task-' || lpad(n::text, 5, '0'), 'https://tasks.example.com/', 'task', true, false,
              '{}', 'advisory', now(), now()
         from generate_series(1, 100) n`,
      [organization.id],
    );
    await client.query(
      `insert into workspaces (id, organization_id, name, auto_apply, working_directory, terraform_version, created_at, updated_at)
       select 'ws-wide-' || n, $1, 'wide-' || n, false, '', '1.9.0', now(), now() from generate_series(1, 200) n`,
      [organization.id],
    );
    await client.query(
      `insert into workspace_tasks (id, workspace_id, task_id, enforcement_level, stages, created_at, updated_at)
       select 'wide-wt-' || w || '-' || t, 'ws-wide-' || w, 'wide-task-' || lpad(t::text, 5, '0'), 'mandatory', '{post_plan}', now(), now()
         from generate_series(1, 200) w cross join generate_series(1, 3) t`,
    );
    await client.query('analyze run_tasks');
    await client.query('analyze workspace_tasks');
  }, 60_000);
  afterAll(async () => {
    client?.release();
    await h?.close();
  });

  it('reads workspace_tasks once for the whole page, and lists each task its 200 associations', async () => {
    await client.query('set plan_cache_mode = force_generic_plan');
    await client.query(`prepare wide_page(text, text, bigint) as ${taskPageText(20)}`);
    try {
      const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `explain (analyze, format json) execute wide_page('${organization.name}', null, 0)`,
      );
      const scans = nodesOf(rows[0]!['QUERY PLAN'][0].Plan).filter((node) => node['Relation Name'] === 'workspace_tasks');
      expect(scans.length).toBeGreaterThan(0);
      expect(scans.map((node) => node['Actual Loops'])).toEqual(scans.map(() => 1));
      const page = await client.query<{ id: string; workspace_task_ids: string }>(`execute wide_page('${organization.name}', null, 0)`);
      expect(page.rows.map((row) => row.workspace_task_ids.split(',').filter(Boolean).length)).toEqual([
        200,
        200,
        200,
        ...Array.from({ length: 17 }, () => 0),
      ]);
    } finally {
      await client.query('deallocate wide_page');
      await client.query('reset plan_cache_mode');
    }
  });
});
