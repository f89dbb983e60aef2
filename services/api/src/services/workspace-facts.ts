import type { Pool } from 'pg';

/** What a workspace's document shows about its runs, read in one statement for a whole page. */
export interface WorkspaceFacts {
  runsCount: number;
  runFailures: number;
  /** The latest run that is not plan-only: HCP's current run (speculative plans never become it). */
  currentRunId: string | null;
  /** The latest run of any kind. */
  latestRunId: string | null;
  /** The newest configuration version that is not provisional, uploaded or not (HCP names a pending one too). */
  currentConfigurationVersionId: string | null;
}

export const NO_FACTS: WorkspaceFacts = {
  runsCount: 0,
  runFailures: 0,
  currentRunId: null,
  latestRunId: null,
  currentConfigurationVersionId: null,
};

type FactsRow = {
  id: string;
  runs_count: number;
  run_failures: number;
  current_run_id: string | null;
  latest_run_id: string | null;
  current_cv_id: string | null;
};

const FACTS_SQL = `
  select w.id,
         (select count(*)::int from runs r where r.workspace_id = w.id) as runs_count,
         (select count(*)::int from runs r where r.workspace_id = w.id and r.status = 'errored') as run_failures,
         (select r.id from runs r where r.workspace_id = w.id and not r.plan_only
           order by r.created_at desc, r.id desc limit 1) as current_run_id,
         (select r.id from runs r where r.workspace_id = w.id order by r.created_at desc, r.id desc limit 1) as latest_run_id,
         (select cv.id from configuration_versions cv where cv.workspace_id = w.id and not cv.provisional
           order by cv.created_at desc, cv.id desc limit 1) as current_cv_id
    from unnest($1::text[]) as w(id)`;

export async function workspaceFacts(pool: Pool, workspaceIds: readonly string[]): Promise<Map<string, WorkspaceFacts>> {
  if (workspaceIds.length === 0) return new Map();
  const { rows } = await pool.query<FactsRow>(FACTS_SQL, [[...workspaceIds]]);
  return new Map(
    rows.map((row) => [
      row.id,
      {
        runsCount: row.runs_count,
        runFailures: row.run_failures,
        currentRunId: row.current_run_id,
        latestRunId: row.latest_run_id,
        currentConfigurationVersionId: row.current_cv_id,
      },
    ]),
  );
}
