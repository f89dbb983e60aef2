import { DB_NOW_ISO, JOBS, numbered, OUTBOX_CHANNEL, type PlanSummary, type Queryable, type RunStatus } from '@runtasks/shared';

/** What a pipeline reports of a local run: its plan (the JSON and what it changes), or its apply, finished or errored. */
export type ExecutionReport =
  | { kind: 'plan'; planJson: string; summary: PlanSummary }
  | { kind: 'plan-errored'; message: string }
  | { kind: 'apply' }
  | { kind: 'apply-errored'; message: string };

/** The status a report of this kind is taken at, and the one it moves the run to. */
export function reportTransition(kind: ExecutionReport['kind']): { from: RunStatus; to: RunStatus } {
  switch (kind) {
    case 'plan':
      return { from: 'planning', to: 'planned' };
    case 'plan-errored':
      return { from: 'planning', to: 'errored' };
    case 'apply':
      return { from: 'applying', to: 'applied' };
    case 'apply-errored':
      return { from: 'applying', to: 'errored' };
  }
}

/** The columns a report sets beside the status, as SQL with `?` placeholders, and their values. */
function reportedColumns(report: ExecutionReport): { sql: string; params: unknown[] } {
  switch (report.kind) {
    case 'plan': {
      const { summary } = report;
      return {
        sql: `, plan_json = ?::jsonb, has_changes = ?, resource_additions = ?, resource_changes = ?, resource_destructions = ?, resource_imports = ?`,
        params: [
          report.planJson,
          summary.hasChanges,
          summary.resourceAdditions,
          summary.resourceChanges,
          summary.resourceDestructions,
          summary.resourceImports,
        ],
      };
    }
    case 'plan-errored':
    case 'apply-errored':
      return { sql: ', execution_error = ?', params: [report.message] };
    case 'apply':
      return { sql: '', params: [] };
  }
}

/**
 * Takes a pipeline's report of a local run, in one statement: the run moves on only from the status the
 * report belongs to (a report repeated, out of order or racing another changes nothing), and its
 * wake-up for the workers is recorded with it. Returns whether the run moved.
 */
export async function takeReport(db: Queryable, runId: string, report: ExecutionReport): Promise<boolean> {
  const { from, to } = reportTransition(report.kind);
  const columns = reportedColumns(report);
  const sql = numbered(`with run as (
      update runs set status = ?, status_timestamps = status_timestamps || jsonb_build_object(?::text, ${DB_NOW_ISO}),
             version = version + 1, updated_at = now()${columns.sql}
       where id = ? and status = ? and execution_mode = 'local' returning id),
    event as (
      insert into outbox_events (topic, aggregate_id, payload, created_at, publish_attempts)
      select ?, id, jsonb_build_object('runId', id), now(), 0 from run returning aggregate_id)
    select pg_notify(?, aggregate_id) from event`);
  const { rows } = await db.query(sql, [to, `${to}-at`, ...columns.params, runId, from, JOBS.runAdvance, OUTBOX_CHANNEL]);
  return rows.length > 0;
}
