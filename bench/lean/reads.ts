/**
 * The lean reference's reads (a raw-`pg` query per route on Koa, keyed by primary key), on the project's own tables so they read the very rows the
 * project's API is measured on: no auth, one `pg` query per resource (plus `count(*)` for a list's
 * total), JSON:API documents of the same attributes. Mounted by bench/lean/api.ts.
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import type pg from 'pg';

const MEDIA_TYPE = 'application/vnd.api+json';
const iso = (value: unknown): unknown => (value instanceof Date ? value.toISOString() : value);
const dasherized = (row: Record<string, unknown>, skip: readonly string[]): Record<string, unknown> =>
  Object.fromEntries(Object.entries(row).flatMap(([key, value]) => (skip.includes(key) ? [] : [[key.replaceAll('_', '-'), iso(value)]])));

function send(ctx: Context, document: unknown): void {
  ctx.type = MEDIA_TYPE;
  ctx.body = JSON.stringify(document);
}

function page(ctx: Context): { size: number; number: number } {
  const size = Math.min(100, Math.max(1, Number(ctx.query['page[size]'] ?? 20) || 20));
  return { size, number: Math.max(1, Number(ctx.query['page[number]'] ?? 1) || 1) };
}

export function mountLeanReads(router: Router, pool: pg.Pool): void {
  router.get('/api/v2/organizations/:name/tasks', async (ctx) => {
    const { size, number } = page(ctx);
    const [rows, count] = await Promise.all([
      pool.query({
        name: 'lean-tasks-page',
        text: `select t.id, t.name, t.url, t.description, t.category, t.enabled, t.global_enabled, t.global_stages,
                      t.global_enforcement_level, t.created_at, t.updated_at
                 from run_tasks t join organizations o on o.id = t.organization_id
                where o.name = $1 order by t.created_at, t.id limit $2 offset $3`,
        values: [ctx.params['name'], size, (number - 1) * size],
      }),
      pool.query<{ total: number }>({
        name: 'lean-tasks-count',
        text: 'select count(*)::int as total from run_tasks t join organizations o on o.id = t.organization_id where o.name = $1',
        values: [ctx.params['name']],
      }),
    ]);
    const total = count.rows[0]?.total ?? 0;
    send(ctx, {
      data: rows.rows.map((row: Record<string, unknown>) => ({ id: row['id'], type: 'tasks', attributes: dasherized(row, ['id']) })),
      meta: {
        pagination: {
          'current-page': number,
          'page-size': size,
          'prev-page': number > 1 ? number - 1 : null,
          'next-page': number * size < total ? number + 1 : null,
          'total-pages': Math.ceil(total / size),
          'total-count': total,
        },
      },
    });
  });

  router.get('/api/v2/runs/:id/task-stages', async (ctx) => {
    const { rows } = await pool.query({
      name: 'lean-run-stages',
      text: `select ts.id, ts.stage, ts.status, ts.status_timestamps, ts.created_at, ts.updated_at,
                    array(select tr.id from task_results tr where tr.task_stage_id = ts.id order by tr.created_at, tr.id)::text[] as result_ids
               from task_stages ts where ts.run_id = $1 order by ts.created_at, ts.id`,
      values: [ctx.params['id']],
    });
    send(ctx, {
      data: rows.map((row: Record<string, unknown>) => ({
        id: row['id'],
        type: 'task-stages',
        attributes: dasherized(row, ['id', 'result_ids']),
        relationships: {
          run: { data: { id: ctx.params['id'], type: 'runs' } },
          'task-results': { data: (row['result_ids'] as string[]).map((id) => ({ id, type: 'task-results' })) },
        },
      })),
      meta: { pagination: { 'current-page': 1, 'total-pages': 1, 'total-count': rows.length } },
    });
  });

  router.get('/api/v2/task-results/:id', async (ctx) => {
    const { rows } = await pool.query({
      name: 'lean-result',
      text: `select id, task_stage_id, task_id, workspace_task_id, task_name, task_url, enforcement_level, stage, is_speculative,
                    status, status_timestamps, message, url, outcomes_count, created_at, updated_at
               from task_results where id = $1`,
      values: [ctx.params['id']],
    });
    const row = rows[0] as Record<string, unknown> | undefined;
    if (!row) {
      ctx.status = 404;
      return;
    }
    send(ctx, {
      data: {
        id: row['id'],
        type: 'task-results',
        attributes: dasherized(row, ['id', 'task_stage_id']),
        relationships: { 'task-stage': { data: { id: row['task_stage_id'], type: 'task-stages' } } },
      },
    });
  });
}
